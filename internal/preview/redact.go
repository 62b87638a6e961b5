package preview

import (
	"maps"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// DefaultRedact are the request fields redacted when the configuration
// names none: credentials that gateways forward in headers.
var DefaultRedact = []string{"headers.authorization", "headers.cookie"}

// Redacted replaces every redacted value.
const Redacted = "REDACTED"

// Redactor renders requests for samples, the preview log and summaries
// with configured fields replaced by "REDACTED". Paths are dotted, in the
// request's JSON names ("headers.authorization", "attributes.user.email",
// "principal"), matched case-insensitively so that no spelling of a
// header slips through.
type Redactor struct {
	paths [][]string
	keys  [numKeys]keyRedaction // paths by request key, for AppendJSON
}

// NewRedactor returns a redactor for the given dotted paths.
func NewRedactor(paths []string) *Redactor {
	r := &Redactor{}
	for _, p := range paths {
		if p = strings.TrimSpace(p); p != "" {
			r.paths = append(r.paths, strings.Split(p, "."))
		}
	}
	r.keys = r.byKey()
	return r
}

// Request returns req as a JSON-ready map with the redacted fields
// replaced. req is not modified; the map shares nothing with it.
func (r *Redactor) Request(req *engine.Request) map[string]any {
	m := requestMap(req)
	for _, p := range r.paths {
		redactPath(m, p)
	}
	return m
}

// redactPath replaces the value at path p in m, wherever it exists.
func redactPath(m map[string]any, p []string) {
	for k, v := range m {
		if !strings.EqualFold(k, p[0]) {
			continue
		}
		if len(p) == 1 {
			m[k] = Redacted
			continue
		}
		if sub, ok := v.(map[string]any); ok {
			redactPath(sub, p[1:])
		}
	}
}

// requestMap copies req into the shape of its JSON, omitting empty
// fields as the JSON does, so maps can be redacted in place.
func requestMap(req *engine.Request) map[string]any {
	m := map[string]any{}
	put := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	put("method", req.Method)
	put("path", req.Path)
	put("host", req.Host)
	put("scheme", req.Scheme)
	put("source_ip", req.SourceIP)
	put("principal", req.Principal)
	if len(req.Query) > 0 {
		m["query"] = stringsToAny(req.Query)
	}
	if len(req.Headers) > 0 {
		m["headers"] = stringsToAny(req.Headers)
	}
	if len(req.Groups) > 0 {
		g := make([]any, len(req.Groups))
		for i, s := range req.Groups {
			g[i] = s
		}
		m["groups"] = g
	}
	if len(req.Attributes) > 0 {
		m["attributes"] = deepCopy(req.Attributes)
	}
	if !req.Time.IsZero() {
		m["time"] = req.Time.UTC().Format(time.RFC3339Nano)
	}
	return m
}

func stringsToAny(in map[string]string) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// deepCopy copies the maps and lists of a JSON value, so redacting the
// copy never touches the request a policy is still evaluating.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := maps.Clone(x)
		for k, e := range out {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
