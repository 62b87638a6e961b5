package apiv1

import "github.com/policyrollout/reconciler/internal/raftstore"

// BranchStatus is one branch other than the live one in /v1/status
// (kind "branch"): the leader's record of what the branch changes and
// whether the tree it holds validates. Without GitHub every such branch
// that changes a policy is an experiment source.
type BranchStatus struct {
	// Name is "branches/<branch>".
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	Branch     string `json:"branch"`
	HeadCommit string `json:"headCommit"`
	// Revision is "<branch>@sha1:<headCommit>".
	Revision string `json:"revision"`
	// ChangedPolicies names, sorted, the policies whose content differs
	// from the live branch's head.
	ChangedPolicies []string         `json:"changedPolicies"`
	Validation      BranchValidation `json:"validation"`
}

// BranchValidation is whether a branch's tree passed the leader's checks,
// with the errors when not. Unlike Validation it has no test counts: the
// leader records none for a branch.
type BranchValidation struct {
	Valid  bool     `json:"valid"`
	Errors []string `json:"errors"`
}

// FromBranch maps the replicated record of a branch, by its record name
// ("branches/<branch>"), to its row in the status.
func FromBranch(name string, r raftstore.BranchRecord) BranchStatus {
	return BranchStatus{Name: name, Kind: KindBranch, Branch: r.Branch, HeadCommit: r.HeadCommit, Revision: r.Revision,
		ChangedPolicies: r.ChangedPolicies, Validation: BranchValidation{Valid: r.Validation.Valid, Errors: r.Validation.Errors}}
}
