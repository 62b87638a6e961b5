package preview

import (
	"strings"

	"github.com/policyrollout/reconciler/internal/engine"
)

// retained returns a copy of req that shares no memory with it but its
// immutable boxed scalars: its strings are copied into one buffer of their
// exact total size, its maps and lists are new. A decoded request's
// strings are substrings of its whole body (engine's fast path shares one
// copy of bodies up to 16 KiB), so keeping req itself would keep the body
// however little of it the fields are, and a gateway request's strings
// keep the buffers they were read into. Add keeps only copies, and so
// holds what requestSize counts; AddDecoded keeps a request from a small
// body as it is and counts the body as well.
func retained(req *engine.Request) *engine.Request {
	c := &stringCopier{}
	c.b.Grow(stringBytes(req))
	out := &engine.Request{
		Method:    c.str(req.Method),
		Path:      c.str(req.Path),
		RawPath:   c.str(req.RawPath),
		Host:      c.str(req.Host),
		Scheme:    c.str(req.Scheme),
		SourceIP:  c.str(req.SourceIP),
		Principal: c.str(req.Principal),
		Query:     c.pairs(req.Query),
		Headers:   c.pairs(req.Headers),
		Time:      req.Time,
	}
	if req.Groups != nil {
		out.Groups = make([]string, len(req.Groups))
		for i, g := range req.Groups {
			out.Groups[i] = c.str(g)
		}
	}
	if req.Attributes != nil {
		out.Attributes = c.value(req.Attributes).(map[string]any)
	}
	return out
}

// stringCopier copies strings into one growing buffer. Strings taken from
// it stay valid as it grows: a strings.Builder never changes bytes it has
// handed out, and it does not grow here, being sized first.
type stringCopier struct{ b strings.Builder }

func (c *stringCopier) str(s string) string {
	if s == "" {
		return ""
	}
	c.b.WriteString(s)
	all := c.b.String()
	return all[len(all)-len(s):]
}

func (c *stringCopier) pairs(p engine.Pairs) engine.Pairs {
	if !p.Present() {
		return engine.Pairs{}
	}
	out := make([]engine.Pair, 0, p.Len())
	for k, v := range p.All() {
		out = append(out, engine.Pair{Name: c.str(k), Value: c.str(v)})
	}
	return engine.NewPairs(out)
}

// value copies an attribute value; scalars other than strings are
// immutable and shared.
func (c *stringCopier) value(v any) any {
	switch x := v.(type) {
	case string:
		return c.str(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[c.str(k)] = c.value(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = c.value(e)
		}
		return out
	}
	return v
}

// stringBytes is the total length of req's strings, keys included.
func stringBytes(req *engine.Request) int {
	n := len(req.Method) + len(req.Path) + len(req.RawPath) + len(req.Host) + len(req.Scheme) + len(req.SourceIP) + len(req.Principal)
	for k, v := range req.Query.All() {
		n += len(k) + len(v)
	}
	for k, v := range req.Headers.All() {
		n += len(k) + len(v)
	}
	for _, g := range req.Groups {
		n += len(g)
	}
	return n + valueStringBytes(req.Attributes)
}

func valueStringBytes(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case map[string]any:
		n := 0
		for k, e := range x {
			n += len(k) + valueStringBytes(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range x {
			n += valueStringBytes(e)
		}
		return n
	}
	return 0
}
