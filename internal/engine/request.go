package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/errs"
)

// ErrBadRequest is wrapped by every error of DecodeRequest and
// RequestFromMap; the API maps it to 400.
var ErrBadRequest = errs.Sentinel(errs.InvalidArgument, "invalid request")

// Request size limits, enforced by DecodeRequest and RequestFromMap.
const (
	// MaxRequestBytes is the largest JSON request DecodeRequest accepts;
	// it matches the API's default body limit.
	MaxRequestBytes = 1 << 20
	// MaxAttributeDepth is how deeply attribute values may nest, counting
	// the attributes object itself as 1.
	MaxAttributeDepth = 32
	// MaxAttributeValues bounds the number of values (scalars, lists and
	// objects) inside attributes.
	MaxAttributeValues = 10_000
	// DefaultMaxHeaders is how many headers a decision request may carry
	// when Limits leave it unset: Envoy's own default (max_headers_count,
	// 100) and room for the headers a gateway adds to what it forwards
	// (x-request-id, x-forwarded-*, X-Original-*). Each header costs a map
	// entry and its strings, many times its bytes in the body.
	DefaultMaxHeaders = 128
	// MaxQueryEntries bounds the entries of query (repeated names count):
	// as many parameters as Go's net/url parses from a URL, so the JSON
	// form accepts what the gateway forms do. The entries are sorted by
	// name, so their count bounds that work too.
	MaxQueryEntries = 10_000
)

// Limits bound a decision request beyond MaxRequestBytes; the API sets
// them from [api]. The zero value means the defaults.
type Limits struct {
	// MaxHeaders bounds the entries of headers (repeated names count);
	// 0 means DefaultMaxHeaders.
	MaxHeaders int
}

func (l Limits) maxHeaders() int {
	if l.MaxHeaders <= 0 {
		return DefaultMaxHeaders
	}
	return l.MaxHeaders
}

// errTooManyHeaders words the header cap without echoing a header.
func errTooManyHeaders(limit int) error {
	return badRequest("headers", "more than %d headers; a decision request may carry at most %d", limit, limit)
}

// errTooManyQuery words the query cap without echoing a parameter.
func errTooManyQuery(int) error {
	return badRequest("query", "more than %d parameters; a decision request may carry at most %d", MaxQueryEntries, MaxQueryEntries)
}

// badRequest is an error of the request schema. Its message names the
// field and what is wrong, never a value of the request: it reaches the
// client, the logs and, through a gateway, the client's response headers,
// and a value can be a credential (issue 22, finding 9).
func badRequest(field, format string, args ...any) error {
	if field == "" {
		return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%w: field %q: %s", ErrBadRequest, field, fmt.Sprintf(format, args...))
}

// DecodeRequest parses the JSON body of a decision request strictly:
// unknown or repeated top-level fields, values of the wrong type (null
// included), a source_ip that is not an address, attributes nested deeper
// than MaxAttributeDepth and trailing data are all errors wrapping
// ErrBadRequest, and so are more headers than DefaultMaxHeaders. Header
// names are lower-cased. A missing time is left zero for the caller to
// fill with the receipt time.
func DecodeRequest(data []byte) (*Request, error) {
	return DecodeRequestWithin(data, Limits{})
}

// DecodeRequestWithin is DecodeRequest within lim: a request over a limit
// is refused as soon as the decoder reaches it, so refusing it costs no
// more than the part read.
func DecodeRequestWithin(data []byte, lim Limits) (*Request, error) {
	if len(data) > MaxRequestBytes {
		return nil, badRequest("", "body of %d bytes is over the limit of %d", len(data), MaxRequestBytes)
	}
	if req, ok := decodeRequestFastWithin(data, lim); ok {
		return req, nil
	}
	return decodeRequestPreciseWithin(data, lim)
}

// defaultRawPath makes raw_path the path when a request in the JSON form
// (or a policy test) gives none: the caller describes the path as it was
// sent, so a rule on request.raw_path (the path a backend receives, "..",
// "%2F" and all) means the same in every decision form.
func defaultRawPath(req *Request) {
	if req.RawPath == "" {
		req.RawPath = req.Path
	}
}

// decodeRequestPrecise is decodeRequestPreciseWithin the default limits.
func decodeRequestPrecise(data []byte) (*Request, error) {
	return decodeRequestPreciseWithin(data, Limits{})
}

// decodeRequestPreciseWithin is DecodeRequestWithin without its size
// check and fast path (request_fast.go): a token stream that words every
// error. The fast path defers to it for all it does not accept, so every
// error comes from here.
func decodeRequestPreciseWithin(data []byte, lim Limits) (*Request, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, badRequest("", "body must be a JSON object")
	}
	req := &Request{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, badRequest("", "malformed JSON: %v", err)
		}
		key := tok.(string) // object keys are always strings
		if seen[key] {
			return nil, badRequest(key, "given twice")
		}
		seen[key] = true
		if err := decodeField(dec, req, key, lim); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, badRequest("", "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest("", "unexpected data after the request object")
	}
	if err := finishRequest(req); err != nil {
		return nil, err
	}
	defaultRawPath(req)
	return req, nil
}

// decodeField reads the value of one top-level field into req.
func decodeField(dec *json.Decoder, req *Request, key string, lim Limits) error {
	if key == "headers" {
		m, err := decodeStringObject(dec, key, lim.maxHeaders(), errTooManyHeaders)
		req.Headers = PairsOf(m)
		return err
	}
	if key == "query" {
		m, err := decodeStringObject(dec, key, MaxQueryEntries, errTooManyQuery)
		req.Query = PairsOf(m)
		return err
	}
	if key == "attributes" {
		v, err := decodeJSONValue(dec, 1, new(int))
		if err != nil {
			return badRequest(key, "%v", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return badRequest(key, "must be an object, not %s", typeName(v))
		}
		req.Attributes = m
		return nil
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		return badRequest("", "malformed JSON: %v", err)
	}
	return setField(req, key, v)
}

// decodeStringObject streams the headers or query object (key), so that
// one over limit is refused after limit+1 entries rather than after
// building them all. Its errors are those setField gives a decoded value.
func decodeStringObject(dec *json.Decoder, key string, limit int, tooMany func(int) error) (map[string]string, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, badRequest("", "malformed JSON: %v", err)
	}
	if tok != json.Delim('{') {
		return nil, badRequest(key, "must be an object of strings, not %s", tokenTypeName(tok))
	}
	m := map[string]string{}
	for n := 0; dec.More(); n++ {
		if n == limit {
			return nil, tooMany(limit)
		}
		kt, err := dec.Token()
		if err != nil {
			return nil, badRequest("", "malformed JSON: %v", err)
		}
		vt, err := dec.Token()
		if err != nil {
			return nil, badRequest("", "malformed JSON: %v", err)
		}
		v, ok := vt.(string)
		if !ok {
			return nil, badRequest(key, "every value must be a string, not %s", tokenTypeName(vt))
		}
		m[kt.(string)] = v // object keys are always strings; the last of repeated names wins, as in a map
	}
	if _, err := dec.Token(); err != nil {
		return nil, badRequest("", "malformed JSON: %v", err)
	}
	return m, nil
}

// tokenTypeName is typeName for the first token of a value.
func tokenTypeName(tok json.Token) string {
	switch tok {
	case json.Delim('{'):
		return "an object"
	case json.Delim('['):
		return "a list"
	}
	return typeName(tok)
}

// setField assigns a decoded value (from JSON or TOML) to the named field.
func setField(req *Request, key string, v any) error {
	var err error
	switch key {
	case "method":
		req.Method, err = asString(key, v)
	case "path":
		req.Path, err = asString(key, v)
	case "raw_path":
		req.RawPath, err = asString(key, v)
	case "host":
		req.Host, err = asString(key, v)
	case "scheme":
		req.Scheme, err = asString(key, v)
	case "source_ip":
		req.SourceIP, err = asAddress(key, v)
	case "principal":
		req.Principal, err = asString(key, v)
	case "query", "headers":
		var m map[string]string
		m, err = asStringMap(key, v)
		if key == "query" {
			if err == nil && len(m) > MaxQueryEntries {
				err = errTooManyQuery(len(m))
			}
			req.Query = PairsOf(m)
		} else {
			req.Headers = PairsOf(m)
		}
	case "groups":
		req.Groups, err = asStringList(key, v)
	case "time":
		req.Time, err = asTime(key, v)
	case "attributes":
		req.Attributes, err = asAttributes(key, v)
	default:
		err = badRequest(key, "unknown field (want method, path, raw_path, host, scheme, query, headers,"+
			" source_ip, principal, groups, attributes or time)")
	}
	return err
}

// finishRequest lower-cases header names, as HTTP/2 does on the wire, so
// that rules can index headers without caring how a client spelt them.
func finishRequest(req *Request) error {
	l := req.Headers.list // the decoder's own, distinct names
	for i := range l {
		l[i].Name = strings.ToLower(l[i].Name)
	}
	slices.SortFunc(l, comparePairs)
	for i := 1; i < len(l); i++ {
		if l[i].Name == l[i-1].Name {
			return badRequest("headers", "a header name is given twice (header names are case-insensitive)")
		}
	}
	return nil
}

func asString(key string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", badRequest(key, "must be a string, not %s", typeName(v))
	}
	return s, nil
}

// asAddress accepts what net/netip parses, zones and IPv4-mapped IPv6
// included; CEL's ip() is stricter, and rules see the string as given.
func asAddress(key string, v any) (string, error) {
	s, err := asString(key, v)
	if err != nil {
		return "", err
	}
	if _, perr := netip.ParseAddr(s); perr != nil {
		return "", badRequest(key, "the value is not an IPv4 or IPv6 address")
	}
	return s, nil
}

func asStringMap(key string, v any) (map[string]string, error) {
	switch m := v.(type) {
	case map[string]string:
		return m, nil
	case map[string]any:
		out := make(map[string]string, len(m))
		for k, e := range m {
			s, ok := e.(string)
			if !ok {
				return nil, badRequest(key, "every value must be a string, not %s", typeName(e))
			}
			out[k] = s
		}
		return out, nil
	}
	return nil, badRequest(key, "must be an object of strings, not %s", typeName(v))
}

func asStringList(key string, v any) ([]string, error) {
	switch l := v.(type) {
	case []string:
		return l, nil
	case []any:
		out := make([]string, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, badRequest(key, "item %d must be a string, not %s", i, typeName(e))
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, badRequest(key, "must be a list of strings, not %s", typeName(v))
}

func asTime(key string, v any) (time.Time, error) {
	switch t := v.(type) {
	case time.Time:
		return t, nil
	case string:
		parsed, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return time.Time{}, badRequest(key, "the value is not an RFC 3339 timestamp")
		}
		return parsed, nil
	}
	return time.Time{}, badRequest(key, "must be an RFC 3339 timestamp string, not %s", typeName(v))
}

// typeName names a decoded value's type the way a JSON or TOML author
// would, for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, int64, int:
		return "a number"
	case []any, []string, []map[string]any:
		return "a list"
	case map[string]any, map[string]string:
		return "an object"
	case time.Time:
		return "a timestamp"
	}
	return fmt.Sprintf("%T", v)
}

// RequestFromMap builds a request from a policy test's `request` table.
// Values are as a TOML decoder gives them (string, int64, float64, bool,
// time.Time, []any, map[string]any); the rules are those of DecodeRequest,
// and time may also be a TOML datetime.
func RequestFromMap(m map[string]any) (*Request, error) {
	req := &Request{}
	for _, key := range sortedKeys(m) {
		if err := setField(req, key, m[key]); err != nil {
			return nil, err
		}
	}
	if err := finishRequest(req); err != nil {
		return nil, err
	}
	defaultRawPath(req)
	return req, nil
}

// sortedKeys makes the first error reported for a bad table deterministic.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
