package apiv1

import (
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// Policy is a policy as GET /v1/policies/{policy} shows it: the resource
// fields, then the policy body with the same keys as its TOML. The body's
// types are the policy file format's own (internal/policy), which the
// API also reads in experiment bodies.
type Policy struct {
	Name          string         `json:"name"`
	Etag          string         `json:"etag"`
	Generation    uint64         `json:"generation"`
	Commit        string         `json:"commit"`
	Description   string         `json:"description,omitempty"`
	DefaultAction policy.Action  `json:"default_action"`
	Group         string         `json:"group"`
	OnError       policy.OnError `json:"on_error"`
	Rules         []policy.Rule  `json:"rules"`
	Tests         []policy.Test  `json:"tests,omitempty"`
	// Lists are the named lists (_lists/) the policy's rules use; their
	// etags are part of the policy's.
	Lists []ListRef `json:"lists,omitempty"`
	// PreviewRules are the rules with `preview = true`: evaluated on live
	// traffic and counted as if enforced, never deciding, with the
	// cluster's counts (samples only with ?view=FULL).
	PreviewRules []preview.RuleView `json:"previewRules,omitempty"`
}

// PolicyList answers GET /v1/policies (AIP-132 List).
type PolicyList struct {
	Policies []Policy `json:"policies"`
}

// ListRef is a named list as a policy resource names it.
type ListRef struct {
	Name    string          `json:"name"`
	File    string          `json:"file"`
	Kind    policy.ListKind `json:"kind"`
	Entries int             `json:"entries"`
	Etag    string          `json:"etag"`
}

// FromLists describes the lists of a compiled policy.
func FromLists(ls []*policy.List) []ListRef {
	var out []ListRef
	for _, l := range ls {
		out = append(out, ListRef{Name: l.Name, File: l.File, Kind: l.Kind, Entries: l.Entries, Etag: l.Etag()})
	}
	return out
}
