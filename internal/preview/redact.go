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

// DefaultShow are the header, query parameter and attribute values shown
// when the configuration names none. Every other value of headers, query
// and attributes is hidden (its name is kept): live traffic carries users'
// credentials under names no deny-list can foresee (x-api-key,
// proxy-authorization, access_token), and a fork's pull request must not
// be able to collect them (issue 16, attack 3).
var DefaultShow = []string{"headers.user-agent", "headers.content-type", "headers.accept", "headers.cf-ipcountry"}

// Redacted replaces every redacted value.
const Redacted = "REDACTED"

// Redactor renders requests for samples, the preview log and summaries by
// allow-list: method, path, raw path, host, scheme, source address,
// principal, groups and time are kept; headers, query parameters and
// attributes keep their names, and their values read "REDACTED" unless a
// show path names them ("headers.user-agent", "query.page",
// "attributes.tenant"). Redact paths then replace more ("principal",
// "attributes.tenant.owner"), even shown ones. Paths are dotted, in the
// request's JSON names, matched case-insensitively so that no spelling of
// a header slips through.
type Redactor struct {
	paths [][]string
	keys  [numKeys]keyRedaction // paths by request key, for AppendJSON
	// show holds, for headers, query and attributes, the lower-cased
	// names whose values are shown.
	show [numKeys]map[string]bool
}

// NewRedactor returns a redactor that shows the values named by show
// (nil: DefaultShow) and replaces those named by redact.
func NewRedactor(redact, show []string) *Redactor {
	if show == nil {
		show = DefaultShow
	}
	r := &Redactor{}
	for _, p := range redact {
		if p = strings.TrimSpace(p); p != "" {
			r.paths = append(r.paths, strings.Split(p, "."))
		}
	}
	r.keys = r.byKey()
	for _, s := range show {
		field, name, ok := strings.Cut(strings.TrimSpace(s), ".")
		for _, k := range [...]int{keyHeaders, keyQuery, keyAttributes} {
			if ok && strings.EqualFold(field, requestKeys[k]) {
				if r.show[k] == nil {
					r.show[k] = map[string]bool{}
				}
				r.show[k][strings.ToLower(name)] = true
			}
		}
	}
	return r
}

// shown reports whether the value of name under request key k is shown.
func (r *Redactor) shown(k int, name string) bool {
	return r.show[k][strings.ToLower(name)]
}

// Hidden reports whether samples hide the value a rule reads, named as
// engine.ValueReads names it: "headers.x-api-key", or a whole field
// ("headers") when the rule reads its values by a computed key. A value is
// shown only when a show path names it and no redact path covers it.
func (r *Redactor) Hidden(read string) bool {
	field, name, named := strings.Cut(read, ".")
	k := -1
	for _, key := range [...]int{keyHeaders, keyQuery, keyAttributes} {
		if strings.EqualFold(field, requestKeys[key]) {
			k = key
		}
	}
	if k < 0 {
		return false // method, path, host…: always shown
	}
	if !named || !r.shown(k, name) {
		return true
	}
	for _, p := range r.paths {
		if strings.EqualFold(p[0], field) && (len(p) == 1 || strings.EqualFold(p[1], name)) {
			return true
		}
	}
	return false
}

// Request returns req as a JSON-ready map with the hidden and redacted
// fields replaced. req is not modified; the map shares nothing with it.
func (r *Redactor) Request(req *engine.Request) map[string]any {
	m := requestMap(req)
	for _, k := range [...]int{keyHeaders, keyQuery, keyAttributes} {
		if sub, ok := m[requestKeys[k]].(map[string]any); ok {
			for name := range sub {
				if !r.shown(k, name) {
					sub[name] = Redacted
				}
			}
		}
	}
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
	put("raw_path", req.RawPath)
	put("host", req.Host)
	put("scheme", req.Scheme)
	put("source_ip", req.SourceIP)
	put("principal", req.Principal)
	if req.Query.Len() > 0 {
		m["query"] = stringsToAny(req.Query)
	}
	if req.Headers.Len() > 0 {
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

func stringsToAny(in engine.Pairs) map[string]any {
	out := make(map[string]any, in.Len())
	for k, v := range in.All() {
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
