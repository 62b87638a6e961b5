package preview

import (
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/jsonenc"
)

// The request's JSON keys, in the order json.Marshal writes a map's keys.
const (
	keyAttributes = iota
	keyGroups
	keyHeaders
	keyHost
	keyMethod
	keyPath
	keyPrincipal
	keyQuery
	keyRawPath
	keyScheme
	keySourceIP
	keyTime
	numKeys
)

var requestKeys = [numKeys]string{"attributes", "groups", "headers", "host", "method", "path", "principal",
	"query", "raw_path", "scheme", "source_ip", "time"}

// keyRedaction is what the redactor's paths do under one request key.
type keyRedaction struct {
	whole bool       // a path names the key itself
	sub   [][]string // the rest of the longer paths that begin with it
}

// byKey sorts the redactor's paths under the request's keys (matched as
// redactPath matches them: case-insensitively).
func (r *Redactor) byKey() [numKeys]keyRedaction {
	var out [numKeys]keyRedaction
	for _, p := range r.paths {
		for k, name := range requestKeys {
			if !strings.EqualFold(name, p[0]) {
				continue
			}
			if len(p) == 1 {
				out[k].whole = true
			} else {
				out[k].sub = append(out[k].sub, p[1:])
			}
		}
	}
	return out
}

// AppendJSON appends req as JSON with the redacted fields replaced: the
// bytes json.Marshal(r.Request(req)) gives, without building the map
// (which, at one preview log line per changed decision, was a tenth of
// the workers' CPU). It reports false when req holds a value the encoder
// does not know (b is then undefined); Request and json.Marshal still do.
// TestRedactorAppendJSON and FuzzRedactorAppendJSON hold it to them.
func (r *Redactor) AppendJSON(b []byte, req *engine.Request) ([]byte, bool) {
	start := len(b)
	b = append(b, '{')
	if len(req.Attributes) > 0 {
		b = appendKey(b, start, keyAttributes)
		var ok bool
		if b, ok = r.appendAttributes(b, req.Attributes); !ok {
			return b, false
		}
	}
	if len(req.Groups) > 0 {
		b = appendKey(b, start, keyGroups)
		if r.keys[keyGroups].whole {
			b = jsonenc.AppendString(b, Redacted)
		} else {
			b = append(b, '[')
			for i, g := range req.Groups {
				if i > 0 {
					b = append(b, ',')
				}
				b = jsonenc.AppendString(b, g)
			}
			b = append(b, ']')
		}
	}
	if req.Headers.Len() > 0 {
		b = r.appendStrings(appendKey(b, start, keyHeaders), keyHeaders, req.Headers)
	}
	b = r.appendString(b, start, keyHost, req.Host)
	b = r.appendString(b, start, keyMethod, req.Method)
	b = r.appendString(b, start, keyPath, req.Path)
	b = r.appendString(b, start, keyPrincipal, req.Principal)
	if req.Query.Len() > 0 {
		b = r.appendStrings(appendKey(b, start, keyQuery), keyQuery, req.Query)
	}
	b = r.appendString(b, start, keyRawPath, req.RawPath)
	b = r.appendString(b, start, keyScheme, req.Scheme)
	b = r.appendString(b, start, keySourceIP, req.SourceIP)
	if !req.Time.IsZero() {
		b = appendKey(b, start, keyTime)
		if r.keys[keyTime].whole {
			b = jsonenc.AppendString(b, Redacted)
		} else {
			// RFC 3339 needs no escaping.
			b = append(b, '"')
			b = req.Time.UTC().AppendFormat(b, time.RFC3339Nano)
			b = append(b, '"')
		}
	}
	return append(b, '}'), true
}

// appendKey appends key k of the object that begins at start.
func appendKey(b []byte, start, k int) []byte {
	if len(b) > start+1 {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, requestKeys[k]...)
	return append(b, '"', ':')
}

// appendString appends key k with v, unless v is empty (omitted, as in
// Request's JSON).
func (r *Redactor) appendString(b []byte, start, k int, v string) []byte {
	if v == "" {
		return b
	}
	b = appendKey(b, start, k)
	if r.keys[k].whole {
		v = Redacted
	}
	return jsonenc.AppendString(b, v)
}

// appendStrings appends the headers or the query, keys sorted, a value
// hidden unless shown, and redacted when a path names its key (longer
// paths reach into nothing: the values are strings).
func (r *Redactor) appendStrings(b []byte, k int, pairs engine.Pairs) []byte {
	red := &r.keys[k]
	if red.whole {
		return jsonenc.AppendString(b, Redacted)
	}
	b = append(b, '{')
	first := true
	for name, v := range pairs.All() { // names ascending, as in Request's JSON
		if !first {
			b = append(b, ',')
		}
		first = false
		if !r.shown(k, name) {
			v = Redacted
		}
		for _, p := range red.sub {
			if len(p) == 1 && strings.EqualFold(name, p[0]) {
				v = Redacted
				break
			}
		}
		b = append(jsonenc.AppendString(b, name), ':')
		b = jsonenc.AppendString(b, v)
	}
	return append(b, '}')
}

// appendAttributes appends the attributes: the values of names not shown
// hidden, the shown ones copied and redacted where a path reaches into
// them.
func (r *Redactor) appendAttributes(b []byte, attrs map[string]any) ([]byte, bool) {
	red := &r.keys[keyAttributes]
	if red.whole {
		return jsonenc.AppendString(b, Redacted), true
	}
	m := make(map[string]any, len(attrs))
	for name, v := range attrs {
		if r.shown(keyAttributes, name) {
			m[name] = deepCopy(v)
		} else {
			m[name] = Redacted
		}
	}
	for _, p := range red.sub {
		redactPath(m, p)
	}
	return appendValue(b, m)
}
