package apiv1

import (
	"maps"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/preview"
)

// Status answers GET /v1/status.
type Status struct {
	NodeID    string `json:"nodeId"`
	Leader    string `json:"leader"`
	RaftState string `json:"raftState"`
	// ActiveGeneration is the cluster's active generation as the
	// answering node has applied it; Commit is its commit.
	ActiveGeneration uint64 `json:"activeGeneration"`
	Commit           string `json:"commit"`
	// Author is its commit's author, when the generation records one.
	Author string `json:"author,omitempty"`
	// ServedGeneration is the generation the answering node answers from.
	ServedGeneration uint64         `json:"servedGeneration"`
	Source           SourceStatus   `json:"source"`
	Policies         []PolicyStatus `json:"policies"`
	// Experiments are the leader's branch records (kind "branch",
	// BranchStatus) and the AIP-236 experiments (kind "experiment",
	// ExperimentStatus), by name (FromStatusExperiments).
	Experiments []StatusExperiment `json:"experiments"`
	Nodes       []Node             `json:"nodes"`
	// PreviewRules are the served policies' rules in preview with the
	// cluster's counts (no samples: GET /v1/policies/{p}?view=FULL).
	PreviewRules []preview.RuleView `json:"previewRules,omitempty"`
	// Parts are the answering node's long-running parts (loader, preview,
	// heartbeats, leader, github) and what each is doing.
	Parts map[string]Part `json:"parts,omitempty"`
	// Statistics sum the nodes' PDP statistics.
	Statistics Statistics `json:"statistics"`
	// ClusterVersion is the lowest release among the members ("" from a
	// 1.0.0 node); Features says which of the releases' features the
	// leader uses at it.
	ClusterVersion string    `json:"clusterVersion"`
	Features       []Feature `json:"features"`
}

// Feature is one row of the feature table.
type Feature struct {
	Name    string `json:"name"`
	Since   string `json:"since"`
	Enabled bool   `json:"enabled"`
}

// Part is what one long-running part of a node is doing.
type Part struct {
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}

// FromParts maps the node's parts' lifecycle statuses; nil stays nil.
func FromParts(parts map[string]lifecycle.Status) map[string]Part {
	if parts == nil {
		return nil
	}
	out := make(map[string]Part, len(parts))
	for name, p := range maps.All(parts) {
		out[name] = Part{State: string(p.State), Message: p.Message}
	}
	return out
}

// SourceStatus is the leader's last read of the policy source.
type SourceStatus struct {
	// Commit is the last revision read ("" before the first read).
	Commit string `json:"commit,omitempty"`
	// Error is why the last read failed, "" when it succeeded.
	Error string `json:"error,omitempty"`
	// Time is when the last read finished.
	Time time.Time `json:"time,omitzero"`
	// Diverged is set while the live branch's head does not descend from
	// the active generation's commit: nothing is promoted until an
	// operator accepts it (POST /v1/generations:acceptHistory).
	Diverged *Divergence `json:"diverged,omitempty"`
}

// Divergence is a live-branch head the leader refuses to promote.
type Divergence struct {
	Commit string    `json:"commit"`
	Active string    `json:"active"`
	Since  time.Time `json:"since"`
}

// FromSource maps the cluster view's source status.
func FromSource(s cluster.SourceStatus) SourceStatus {
	out := SourceStatus{Commit: s.Commit, Error: s.Error, Time: s.Time}
	if d := s.Diverged; d != nil {
		out.Diverged = &Divergence{Commit: d.Commit, Active: d.Active, Since: d.Since}
	}
	return out
}

// PolicyStatus is one policy with its status conditions (Kubewarden's
// policy lifecycle): Valid and Pending from the leader, Ready per node,
// Active with the generation, Invalid and PullError with the errors.
type PolicyStatus struct {
	Name string `json:"name"`
	// Etag is the etag of the active generation's version, "" when the
	// policy is not in it.
	Etag       string      `json:"etag"`
	Conditions []Condition `json:"conditions"`
}

// Condition is a Kubernetes-style status condition, extended with the
// node and the generation it is about.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	NodeID             string    `json:"nodeId,omitempty"`
	Generation         uint64    `json:"generation,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime,omitzero"`
}

// ExperimentStatus is one AIP-236 experiment in /v1/status (kind
// "experiment"): its name, etag, preview state (absent before the first
// startPreview), whether it is previewed (false over the cap) and what it
// comes from.
type ExperimentStatus struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Etag      string `json:"etag"`
	State     string `json:"state,omitempty"`
	Previewed bool   `json:"previewed"`
	// StopReason is why the system suspended it (autoStop).
	StopReason string `json:"stopReason,omitempty"`
	// Valid is the experiment's validation (absent when none was made);
	// Conflict says why its source cannot be merged into main.
	Valid    *bool                  `json:"valid,omitempty"`
	Conflict string                 `json:"conflict,omitempty"`
	Source   ExperimentStatusSource `json:"source"`
}

// ExperimentStatusSource is what an experiment in the status comes from.
type ExperimentStatusSource struct {
	Kind       string `json:"kind"`
	Number     int    `json:"number,omitempty"`
	Branch     string `json:"branch,omitempty"`
	HeadCommit string `json:"headCommit,omitempty"`
}

// FromExperimentStatus maps a replicated experiment to its row in the
// status.
func FromExperimentStatus(e *preview.Experiment) ExperimentStatus {
	es := ExperimentStatus{Name: e.Name, Kind: KindExperiment, Etag: e.Etag, Previewed: e.Previewed, Conflict: e.Conflict,
		Source: ExperimentStatusSource{Kind: string(e.Source.Kind), Number: e.Source.Number, Branch: e.Source.Branch,
			HeadCommit: e.Source.HeadCommit}}
	if e.PreviewMetadata != nil {
		es.State, es.StopReason = string(e.PreviewMetadata.State), e.PreviewMetadata.StopReason
	}
	if e.Validation != nil {
		valid := e.Validation.Valid
		es.Valid = &valid
	}
	return es
}
