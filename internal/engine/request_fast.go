package engine

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The fast path of DecodeRequest.
//
// decodeRequestFast is a hand-written scanner for the request schema. It
// accepts only what it can decode exactly as the precise decoder
// (decodeRequestPrecise) would: a well-formed JSON object of known, distinct
// top-level fields with values of the right types, within the attribute
// limits. On anything else, errors of every kind included, it gives up and
// DecodeRequest runs the precise decoder, which alone words the errors. The
// two must agree on every input the fast path accepts; request_fast_test.go
// checks that, also as a fuzz target.
//
// What makes it fast: no reflection and no encoding/json token stream
// (which allocates per token and, inside a stream, builds an error value
// after every top-level value), and, for bodies up to sharedBodyMax, one
// string conversion of the whole body that every unescaped string is a
// substring of.

// sharedBodyMax is the largest body whose strings share one copy of it. A
// kept request (the mirror keeps them) then pins the whole body, so large
// bodies, which may be mostly padding, get a copy per string instead.
const sharedBodyMax = 16 << 10

// maxFastPairs is how many strings of groups the fast path collects on the
// stack before it copies them into the list, and half of how many entries
// of query and headers (pairBuf).
const maxFastPairs = 16

// Bits of the top-level fields seen, for refusing repeated fields.
const (
	seenMethod = 1 << iota
	seenPath
	seenHost
	seenScheme
	seenQuery
	seenHeaders
	seenSourceIP
	seenPrincipal
	seenGroups
	seenAttributes
	seenTime
	seenRawPath
)

type fastDecoder struct {
	data       []byte
	maxHeaders int
	pos        int
	shared     string // string(data) when len(data) <= sharedBodyMax, else ""
	count      int    // attribute values so far
	// pairs holds the entries of query and headers, at query and headers,
	// until the request they go into is allocated (request_alloc.go).
	pairs          pairBuf
	query, headers pairSpan
}

// decodeRequestFast is decodeRequestFastWithin the default limits.
func decodeRequestFast(data []byte) (*Request, bool) {
	return decodeRequestFastWithin(data, Limits{})
}

// decodeRequestFastWithin decodes data, or reports false when the precise
// decoder must (see above), over a limit of lim included. It does not
// check MaxRequestBytes.
func decodeRequestFastWithin(data []byte, lim Limits) (*Request, bool) {
	d := fastDecoder{data: data, maxHeaders: lim.maxHeaders()}
	d.skipSpace()
	if !d.consume('{') {
		return nil, false
	}
	if len(data) <= sharedBodyMax {
		d.shared = string(data)
	}
	var req Request // on the stack: newRequest allocates it with its pairs
	seen := 0
	d.skipSpace()
	if !d.consume('}') {
		for {
			if !d.peek('"') {
				return nil, false
			}
			key, ok := d.rawKey()
			if !ok {
				return nil, false
			}
			d.skipSpace()
			if !d.consume(':') {
				return nil, false
			}
			d.skipSpace()
			bit, ok := d.field(&req, key)
			if !ok || seen&bit != 0 {
				return nil, false
			}
			seen |= bit
			d.skipSpace()
			if d.consume(',') {
				d.skipSpace()
				continue
			}
			if d.consume('}') {
				break
			}
			return nil, false
		}
	}
	d.skipSpace()
	if d.pos != len(data) {
		return nil, false
	}
	defaultRawPath(&req)
	return d.pairs.newRequest(&req, d.query, d.headers), true
}

// field decodes the value of top-level field key into req and returns the
// field's bit. key is the key's raw bytes; escaped keys never match.
func (d *fastDecoder) field(req *Request, key []byte) (int, bool) {
	var ok bool
	switch string(key) {
	case "method":
		req.Method, ok = d.stringValue()
		return seenMethod, ok
	case "path":
		req.Path, ok = d.stringValue()
		return seenPath, ok
	case "raw_path":
		req.RawPath, ok = d.stringValue()
		return seenRawPath, ok
	case "host":
		req.Host, ok = d.stringValue()
		return seenHost, ok
	case "scheme":
		req.Scheme, ok = d.stringValue()
		return seenScheme, ok
	case "principal":
		req.Principal, ok = d.stringValue()
		return seenPrincipal, ok
	case "source_ip":
		req.SourceIP, ok = d.stringValue()
		if ok {
			_, err := netip.ParseAddr(req.SourceIP)
			ok = err == nil
		}
		return seenSourceIP, ok
	case "time":
		var s string
		if s, ok = d.stringValue(); ok {
			var err error
			req.Time, err = time.Parse(time.RFC3339Nano, s)
			ok = err == nil
		}
		return seenTime, ok
	case "query":
		d.query, ok = d.stringPairs(false, MaxQueryEntries)
		return seenQuery, ok
	case "headers":
		d.headers, ok = d.stringPairs(true, d.maxHeaders)
		return seenHeaders, ok
	case "groups":
		req.Groups, ok = d.stringList()
		return seenGroups, ok
	case "attributes":
		if !d.peek('{') {
			return seenAttributes, false
		}
		req.Attributes, ok = d.object(1)
		return seenAttributes, ok
	}
	return 0, false
}

func (d *fastDecoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *fastDecoder) peek(c byte) bool {
	return d.pos < len(d.data) && d.data[d.pos] == c
}

func (d *fastDecoder) consume(c byte) bool {
	if d.peek(c) {
		d.pos++
		return true
	}
	return false
}

func (d *fastDecoder) sub(start, end int) string {
	if d.shared != "" {
		return d.shared[start:end]
	}
	return string(d.data[start:end])
}

// scanString finds the end of the JSON string at d.pos (a '"'), moves past
// it, and returns the offset of its closing quote and what its content
// holds: escapes, and bytes outside ASCII. Raw control characters, which
// JSON forbids, and a missing closing quote fail.
func (d *fastDecoder) scanString() (end int, escaped, nonASCII, ok bool) {
	data := d.data
	i := d.pos + 1
	for i < len(data) {
		// Most bytes are plain: one table load each rather than the four
		// comparisons below (a tenth of decoding a typical body).
		for i < len(data) && plainStringByte[data[i]] {
			i++
		}
		if i == len(data) {
			break
		}
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return i, escaped, nonASCII, true
		case c == '\\':
			escaped = true
			i += 2 // the escaped byte is never the closing quote
			continue
		case c < 0x20:
			return 0, false, false, false
		case c >= utf8.RuneSelf:
			nonASCII = true
		}
		i++
	}
	return 0, false, false, false
}

// plainStringByte tells the bytes that stand for themselves inside a JSON
// string: printable ASCII but the quote and the backslash.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// rawKey returns the bytes of an object key as written; a key with escapes
// fails, which only costs the fast path (the precise decoder unescapes).
func (d *fastDecoder) rawKey() ([]byte, bool) {
	start := d.pos + 1
	end, escaped, _, ok := d.scanString()
	if !ok || escaped {
		return nil, false
	}
	return d.data[start:end], true
}

// stringValue decodes the JSON string at d.pos as encoding/json does
// (invalid UTF-8 and lone surrogates become U+FFFD); anything else fails.
func (d *fastDecoder) stringValue() (string, bool) {
	if !d.peek('"') {
		return "", false
	}
	start := d.pos
	end, escaped, nonASCII, ok := d.scanString()
	if !ok {
		return "", false
	}
	if !escaped && (!nonASCII || utf8.Valid(d.data[start+1:end])) {
		return d.sub(start+1, end), true
	}
	var s string
	if err := json.Unmarshal(d.data[start:end+1], &s); err != nil {
		return "", false
	}
	return s, true
}

// stringPairs decodes an object of strings into d.pairs. Header names are
// lower-cased, and names equal once lower-cased fail: the precise decoder
// decides whether that is an error (different names) or not (a repeated
// name). Of repeated query names the last wins, as in a map. More than
// limit entries (0: no limit) fail as soon as the next is read.
func (d *fastDecoder) stringPairs(lower bool, limit int) (pairSpan, bool) {
	if !d.consume('{') {
		return pairSpan{}, false
	}
	start := d.pairs.n
	d.skipSpace()
	if !d.consume('}') {
		for {
			k, ok := d.stringValue()
			if !ok {
				return pairSpan{}, false
			}
			d.skipSpace()
			if !d.consume(':') {
				return pairSpan{}, false
			}
			d.skipSpace()
			v, ok := d.stringValue()
			if !ok {
				return pairSpan{}, false
			}
			if lower {
				k = strings.ToLower(k)
			}
			if d.pairs.n-start == limit && limit > 0 {
				return pairSpan{}, false
			}
			d.pairs.add(Pair{k, v})
			d.skipSpace()
			if d.consume(',') {
				d.skipSpace()
				continue
			}
			if d.consume('}') {
				break
			}
			return pairSpan{}, false
		}
	}
	l := d.pairs.list()[start:]
	sortPairs(l)
	kept := dropShadowed(l)
	if lower && len(kept) != len(l) {
		return pairSpan{}, false
	}
	d.pairs.truncate(start + len(kept))
	return pairSpan{start: start, end: d.pairs.n, present: true}, true
}

// sortPairs sorts by name, stably: of repeated names, the last stays last.
// A request has a few, which insertion sorts without a call per compare.
func sortPairs(l []Pair) {
	if len(l) > maxFastPairs {
		slices.SortStableFunc(l, comparePairs)
		return
	}
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j-1].Name > l[j].Name; j-- {
			l[j-1], l[j] = l[j], l[j-1]
		}
	}
}

// stringList decodes a list of strings.
func (d *fastDecoder) stringList() ([]string, bool) {
	if !d.consume('[') {
		return nil, false
	}
	var stack [maxFastPairs]string
	items := stack[:0]
	d.skipSpace()
	if !d.consume(']') {
		for {
			s, ok := d.stringValue()
			if !ok {
				return nil, false
			}
			items = append(items, s)
			d.skipSpace()
			if d.consume(',') {
				d.skipSpace()
				continue
			}
			if d.consume(']') {
				break
			}
			return nil, false
		}
	}
	return append(make([]string, 0, len(items)), items...), true
}

// value decodes one attribute value at depth, counting it, with the
// precise decoder's limits: more than MaxAttributeValues values, or a list
// or object deeper than MaxAttributeDepth, fail.
func (d *fastDecoder) value(depth int) (any, bool) {
	if d.count++; d.count > MaxAttributeValues || d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; c {
	case '"':
		return d.stringValue()
	case '{':
		d.count-- // object counts itself
		return d.object(depth)
	case '[':
		if depth > MaxAttributeDepth {
			return nil, false
		}
		return d.list(depth)
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	default:
		return d.number()
	}
}

// object decodes an attribute object at depth; it counts itself.
func (d *fastDecoder) object(depth int) (map[string]any, bool) {
	if d.count++; d.count > MaxAttributeValues || depth > MaxAttributeDepth || !d.consume('{') {
		return nil, false
	}
	m := map[string]any{}
	d.skipSpace()
	if d.consume('}') {
		return m, true
	}
	for {
		k, ok := d.stringValue()
		if !ok {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		d.skipSpace()
		if !d.consume(':') {
			return nil, false
		}
		d.skipSpace()
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[k] = v
		d.skipSpace()
		if d.consume(',') {
			d.skipSpace()
			continue
		}
		if d.consume('}') {
			return m, true
		}
		return nil, false
	}
}

// list decodes an attribute list at depth (the caller counted it).
func (d *fastDecoder) list(depth int) ([]any, bool) {
	d.pos++ // '['
	l := []any{}
	d.skipSpace()
	if d.consume(']') {
		return l, true
	}
	for {
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		l = append(l, v)
		d.skipSpace()
		if d.consume(',') {
			d.skipSpace()
			continue
		}
		if d.consume(']') {
			return l, true
		}
		return nil, false
	}
}

// literal consumes lit, which must not run on into a letter or digit.
func (d *fastDecoder) literal(lit string) bool {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return false
	}
	d.pos += len(lit)
	return d.delimited()
}

// delimited reports whether a scalar that ended at d.pos is followed by
// what may follow a value: the end, a space, a comma or a closing bracket.
func (d *fastDecoder) delimited() bool {
	if d.pos == len(d.data) {
		return true
	}
	switch d.data[d.pos] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// number decodes a number in JSON's grammar as a float64, as encoding/json
// does into an interface; one out of float64's range fails.
func (d *fastDecoder) number() (any, bool) {
	data := d.data
	start, i := d.pos, d.pos
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = skipDigits(data, i)
	default:
		return nil, false
	}
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return nil, false
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return nil, false
		}
		i = j
	}
	d.pos = i
	if !d.delimited() {
		return nil, false
	}
	f, err := strconv.ParseFloat(d.sub(start, i), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}
