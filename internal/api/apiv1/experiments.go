package apiv1

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// Experiment is an AIP-236 PolicyExperiment as GET
// /v1/policies/{p}/experiments/{id} shows it: the resource and, beside
// it, the stats of its current version and, when thresholds are
// configured for its policy, the judgement of those stats.
type Experiment struct {
	// Name is "policies/{policy}/experiments/{id}".
	Name string `json:"name"`
	// Etag is the etag of Policy: the same content gives the same etag.
	Etag string `json:"etag"`
	// Policy is the full proposed policy, named "policies/{policy}" as
	// the live one is, so that it posts back unchanged.
	Policy          *policy.Policy    `json:"policy"`
	PreviewMetadata *PreviewMetadata  `json:"previewMetadata,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	AutoStop        *AutoStop         `json:"autoStop,omitempty"`
	Source          ExperimentSource  `json:"source"`
	// Previewed is false when the experiment is over the cap; Reason says so.
	Previewed bool   `json:"previewed"`
	Reason    string `json:"notPreviewedReason,omitempty"`
	// Conflict, on a branch or pull request experiment, says why its
	// source cannot be merged into the live branch.
	Conflict    string       `json:"conflict,omitempty"`
	Validation  *Validation  `json:"validation,omitempty"`
	ListChanges []ListChange `json:"listChanges,omitempty"`
	CreateTime  time.Time    `json:"createTime"`
	UpdateTime  time.Time    `json:"updateTime"`
	// Stats and Summary are computed on the nodes (merged over the
	// heartbeats), not replicated: preview's own shapes.
	Stats   *preview.Stats   `json:"stats,omitempty"`
	Summary *preview.Verdict `json:"summary,omitempty"`
}

// ExperimentList is one page of GET /v1/policies/{p}/experiments.
type ExperimentList struct {
	Experiments   []Experiment `json:"experiments"`
	NextPageToken string       `json:"nextPageToken,omitempty"`
}

// PreviewMetadata is PolicyPreviewMetadata; every field is output only.
type PreviewMetadata struct {
	State     string    `json:"state"`
	LogPrefix string    `json:"logPrefix"`
	StartTime time.Time `json:"startTime,omitzero"`
	StopTime  time.Time `json:"stopTime,omitzero"`
	// StopReason says why the system suspended the preview (autoStop).
	StopReason string `json:"stopReason,omitempty"`
}

// AutoStop ends a preview by itself after a duration or a number of
// requests.
type AutoStop struct {
	Duration Duration `json:"duration,omitzero"`
	Requests uint64   `json:"requests,omitempty"`
}

// Duration is a time.Duration in proto3 JSON ("86400s").
type Duration time.Duration

// IsZero is for omitzero.
func (d Duration) IsZero() bool { return d == 0 }

// MarshalJSON writes the seconds, "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(strconv.FormatFloat(time.Duration(d).Seconds(), 'f', -1, 64) + "s")
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Duration) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	secs, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
	if err != nil {
		return err
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// ExperimentSource is the origin of an experiment: a pull request, a
// branch, or an API call, with the commit its policy was read from.
type ExperimentSource struct {
	Kind       string `json:"kind"`
	Number     int    `json:"number,omitempty"`
	Branch     string `json:"branch,omitempty"`
	HeadCommit string `json:"headCommit,omitempty"`
	URL        string `json:"url,omitempty"`
}

// Validation is whether the tree the live branch would hold with the
// experiment committed passed the leader's checks.
type Validation struct {
	Valid  bool     `json:"valid"`
	Errors []string `json:"errors"`
	// Tests counts the policy tests and how many pass; nil when the
	// policy did not compile.
	Tests *TestCounts `json:"tests,omitempty"`
}

// TestCounts is how many of a policy's tests ran and how many passed.
type TestCounts struct {
	Total  int `json:"total"`
	Passed int `json:"passed"`
}

// ListChange is what an experiment changes in one named list.
type ListChange struct {
	Name     string `json:"name"`
	File     string `json:"file"`
	Added    int    `json:"added"`
	Removed  int    `json:"removed"`
	Entries  int    `json:"entries"`
	Etag     string `json:"etag"`
	LiveEtag string `json:"liveEtag,omitempty"`
}

// FromExperiment maps preview's view of a replicated experiment (its
// public form, with its stats).
func FromExperiment(v preview.View) Experiment {
	e := v.Experiment
	out := Experiment{Stats: v.Stats, Summary: v.Summary}
	if e == nil {
		return out
	}
	out.Name, out.Etag, out.Policy, out.Annotations = e.Name, e.Etag, e.Policy, e.Annotations
	out.Previewed, out.Reason, out.Conflict = e.Previewed, e.Reason, e.Conflict
	out.CreateTime, out.UpdateTime = e.CreateTime, e.UpdateTime
	out.Source = ExperimentSource{Kind: string(e.Source.Kind), Number: e.Source.Number, Branch: e.Source.Branch,
		HeadCommit: e.Source.HeadCommit, URL: e.Source.URL}
	if m := e.PreviewMetadata; m != nil {
		out.PreviewMetadata = &PreviewMetadata{State: string(m.State), LogPrefix: m.LogPrefix, StartTime: m.StartTime,
			StopTime: m.StopTime, StopReason: m.StopReason}
	}
	if a := e.AutoStop; a != nil {
		out.AutoStop = &AutoStop{Duration: Duration(a.Duration.D), Requests: a.Requests}
	}
	if val := e.Validation; val != nil {
		out.Validation = &Validation{Valid: val.Valid, Errors: val.Errors}
		if t := val.Tests; t != nil {
			out.Validation.Tests = &TestCounts{Total: t.Total, Passed: t.Passed}
		}
	}
	if e.ListChanges != nil {
		out.ListChanges = make([]ListChange, 0, len(e.ListChanges))
	}
	for _, c := range e.ListChanges {
		out.ListChanges = append(out.ListChanges, ListChange(c))
	}
	return out
}
