package preview

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Page sizes (AIP-158): 0 means the default, more than the maximum is
// lowered to it.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// ListRequest lists the experiments of one live policy.
type ListRequest struct {
	Parent    string // "policies/{policy}"
	PageSize  int
	PageToken string
	// Filter is "", "preview_metadata.state = ACTIVE" or
	// "preview_metadata.state = SUSPENDED" (see ParseFilter).
	Filter string
}

// ListResponse is one page of experiments, in name order.
type ListResponse struct {
	Experiments   []*Experiment `json:"experiments"`
	NextPageToken string        `json:"nextPageToken,omitempty"`
}

// Filter selects experiments by preview state; the zero Filter selects all.
type Filter struct {
	State State
}

// Match reports whether e passes the filter. An experiment never started
// has no state, so it matches only the empty filter.
func (f Filter) Match(e *Experiment) bool {
	if f.State == "" {
		return true
	}
	return e.PreviewMetadata != nil && e.PreviewMetadata.State == f.State
}

// filterField is the one field the filter grammar knows.
const filterField = "preview_metadata.state"

// ParseFilter parses the AIP-160 subset the experiments list supports:
// empty, or `preview_metadata.state = ACTIVE|SUSPENDED` with any spacing
// around "=". Anything else is INVALID_ARGUMENT, so that a filter we
// would misread is refused rather than ignored.
func ParseFilter(s string) (Filter, error) {
	terms, err := ParseComparisons(s, filterField)
	if err != nil || len(terms) == 0 {
		return Filter{}, err
	}
	if len(terms) > 1 {
		return Filter{}, errorf(InvalidArgument,
			"unsupported filter %q: only %s = ACTIVE or %s = SUSPENDED", strings.TrimSpace(s), filterField, filterField)
	}
	switch value := terms[0].Value; State(value) {
	case Active, Suspended:
		return Filter{State: State(value)}, nil
	default:
		return Filter{}, errorf(InvalidArgument, "unsupported filter value %q: want ACTIVE or SUSPENDED", value)
	}
}

// Comparison is one `field = value` term of a filter.
type Comparison struct {
	Field, Value string
}

// maxFilterTerms bounds the terms of one filter (each is one comparison
// per listed resource).
const maxFilterTerms = 8

// ParseComparisons parses the AIP-160 subset the lists support: empty, or
// `field = value` terms joined by AND, each field one of fields and at
// most once, a value of printable ASCII without spaces, backslashes or "=", perhaps in
// double quotes (kept: Unquote removes them where a field accepts them). Anything else is INVALID_ARGUMENT naming the
// filter parameter, so that a filter we would misread is refused rather
// than ignored.
func ParseComparisons(s string, fields ...string) ([]Comparison, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return errorf(InvalidArgument, "filter %q: %s; supported: %s = value, terms joined by AND",
			s, why, strings.Join(fields, ", "))
	}
	parts := strings.Split(s, " AND ")
	if len(parts) > maxFilterTerms {
		return nil, bad(fmt.Sprintf("more than %d terms", maxFilterTerms))
	}
	out := make([]Comparison, 0, len(parts))
	for _, part := range parts {
		field, value, ok := strings.Cut(part, "=")
		field, value = strings.TrimSpace(field), strings.TrimSpace(value)
		if !ok || !slices.Contains(fields, field) {
			return nil, bad(fmt.Sprintf("unsupported term %q", strings.TrimSpace(part)))
		}
		if slices.ContainsFunc(out, func(c Comparison) bool { return c.Field == field }) {
			return nil, bad(fmt.Sprintf("%s is compared twice", field))
		}
		inner := value
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			inner = value[1 : len(value)-1]
		}
		if !filterValue(inner) {
			return nil, bad(fmt.Sprintf("empty or unsupported value in %q", strings.TrimSpace(part)))
		}
		out = append(out, Comparison{Field: field, Value: value})
	}
	return out, nil
}

// filterValue reports whether v can be a filter value: printable ASCII
// without spaces, quotes, backslashes or "=" (names, states, booleans).
func filterValue(v string) bool {
	if v == "" || len(v) > 256 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c > '~' || c == '"' || c == '\\' || c == '=' {
			return false
		}
	}
	return true
}

// Unquote is v without the double quotes around it, if any.
func Unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// pageToken is what an opaque page token encodes: where the page ended
// and the request it belongs to, since AIP-158 forbids changing the
// request between pages.
type pageToken struct {
	After  string `json:"a"`
	Parent string `json:"p"`
	Filter string `json:"f"`
}

func (t pageToken) encode() string {
	b, _ := json.Marshal(t) // three strings always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(s string) (pageToken, error) {
	var t pageToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil {
		return t, errorf(InvalidArgument, "pageToken is not one this API issued: send the nextPageToken of the previous page, unchanged")
	}
	return t, nil
}

// List returns one page of the parent policy's experiments among exps.
func List(exps []*Experiment, req ListRequest) (ListResponse, error) {
	polName, err := parsePolicy(req.Parent)
	if err != nil {
		return ListResponse{}, err
	}
	f, err := ParseFilter(req.Filter)
	if err != nil {
		return ListResponse{}, err
	}
	size, err := pageSize(req.PageSize)
	if err != nil {
		return ListResponse{}, err
	}
	tok := pageToken{Parent: req.Parent, Filter: strings.TrimSpace(req.Filter)}
	if req.PageToken != "" {
		prev, err := decodeToken(req.PageToken)
		if err != nil {
			return ListResponse{}, err
		}
		if prev.Parent != tok.Parent || prev.Filter != tok.Filter {
			return ListResponse{}, errorf(InvalidArgument, "pageToken was issued for another parent or filter: send the request it was issued for, or no pageToken")
		}
		tok.After = prev.After
	}
	return page(selectExperiments(exps, polName, f, tok.After), size, tok), nil
}

func pageSize(n int) (int, error) {
	switch {
	case n < 0:
		return 0, errorf(InvalidArgument, "pageSize must not be negative, not %d", n)
	case n == 0:
		return DefaultPageSize, nil
	}
	return min(n, MaxPageSize), nil
}

// selectExperiments returns, in name order, the parent's experiments
// passing f and named after `after`.
func selectExperiments(exps []*Experiment, polName string, f Filter, after string) []*Experiment {
	var out []*Experiment
	for _, e := range exps {
		if e != nil && e.PolicyName() == polName && f.Match(e) && e.Name > after {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *Experiment) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func page(sel []*Experiment, size int, tok pageToken) ListResponse {
	if len(sel) <= size {
		return ListResponse{Experiments: nonNil(sel)}
	}
	tok.After = sel[size-1].Name
	return ListResponse{Experiments: sel[:size], NextPageToken: tok.encode()}
}

// nonNil makes an empty page render as [] rather than null.
func nonNil(s []*Experiment) []*Experiment {
	if s == nil {
		return []*Experiment{}
	}
	return s
}
