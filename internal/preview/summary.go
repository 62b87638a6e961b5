package preview

import (
	"fmt"
	"strconv"

	"github.com/policyrollout/reconciler/internal/engine"
)

// Kind says what an experiment previews.
type Kind string

// The kinds of previews AIP-236 asks for.
const (
	KindUpdate    Kind = "update"     // a change to a live policy
	KindNewPolicy Kind = "new-policy" // no live version: compared with a no-op
	KindDeletion  Kind = "deletion"   // the experiment is a no-op
)

// Thresholds mark a summary failing when too much traffic would change
// (per policy; nil means no limit). Ratios are of evaluated requests,
// from 0 to 1.
type Thresholds struct {
	MaxAllowToDenyRatio *float64 `json:"max_allow_to_deny_ratio,omitempty" toml:"max_allow_to_deny_ratio"`
	MaxDenyToAllowRatio *float64 `json:"max_deny_to_allow_ratio,omitempty" toml:"max_deny_to_allow_ratio"`
}

// IsZero reports whether t sets no limit.
func (t Thresholds) IsZero() bool {
	return t.MaxAllowToDenyRatio == nil && t.MaxDenyToAllowRatio == nil
}

// ThresholdSet holds the thresholds of each policy by name; the entry "*"
// applies to policies without their own ([preview.thresholds] in
// config.toml, already merged key by key with "*").
type ThresholdSet map[string]Thresholds

// For returns the thresholds of policy (a bare name such as "web").
func (s ThresholdSet) For(policy string) Thresholds {
	if t, ok := s[policy]; ok {
		return t
	}
	return s["*"]
}

// Check judges stats: on live traffic when there is some, else on the
// replayed traffic. It returns a one-line reason when failing.
func (t Thresholds) Check(st Stats) (failing bool, reason string) {
	c, what := st.Counts, "live traffic"
	if c.Evaluated == 0 {
		c, what = st.Replayed.Counts, "replayed traffic"
	}
	if c.Evaluated == 0 {
		return false, ""
	}
	if r, limit := ratio(c.AllowToDeny, c.Evaluated), t.MaxAllowToDenyRatio; limit != nil && r > *limit {
		return true, reasonText("ALLOW→DENY", r, c.AllowToDeny, c.Evaluated, what, "max_allow_to_deny_ratio", *limit)
	}
	if r, limit := ratio(c.DenyToAllow, c.Evaluated), t.MaxDenyToAllowRatio; limit != nil && r > *limit {
		return true, reasonText("DENY→ALLOW", r, c.DenyToAllow, c.Evaluated, what, "max_deny_to_allow_ratio", *limit)
	}
	return false, ""
}

func ratio(n, of uint64) float64 { return float64(n) / float64(of) }

func reasonText(change string, r float64, n, of uint64, what, key string, limit float64) string {
	return fmt.Sprintf("%s for %s of %s (%d of %d), over %s %s",
		change, percent(r), what, n, of, key, strconv.FormatFloat(limit, 'g', -1, 64))
}

func percent(r float64) string { return strconv.FormatFloat(100*r, 'f', 2, 64) + "%" }

// Summary is what a person needs to decide on one experiment: what it
// previews, both etags, its state, the stats and whether it passes the
// thresholds. The PR comment shows one per changed policy.
type Summary struct {
	Policy         string     `json:"policy"` // "policies/{policy}"
	Experiment     string     `json:"experiment,omitempty"`
	Kind           Kind       `json:"kind"`
	ExperimentEtag string     `json:"experimentEtag"`
	LiveEtag       string     `json:"liveEtag"`
	State          State      `json:"state,omitempty"`
	NotPreviewed   string     `json:"notPreviewed,omitempty"`
	Source         *Source    `json:"source,omitempty"`
	Stats          Stats      `json:"stats"`
	Thresholds     Thresholds `json:"thresholds,omitzero"`
	Failing        bool       `json:"failing"`
	Reason         string     `json:"reason,omitempty"`
	// Enforced are the rules in preview in the live policy that the
	// experiment enforces unchanged, with what they counted in preview.
	Enforced []EnforcedRule `json:"enforced,omitempty"`
	// ListChanges are the entries the experiment adds to and removes
	// from each named list it changes.
	ListChanges []ListChange `json:"listChanges,omitempty"`
}

// Summarize builds the summary of experiment e against the live policy
// whose etag is liveEtag ("" when there is none), from its merged stats
// (those of e's current etag; see Merge).
func Summarize(e *Experiment, liveEtag string, merged []Stats, th Thresholds) Summary {
	s := Summary{
		Policy: "policies/" + e.PolicyName(), Experiment: e.Name, Kind: kindOf(liveEtag != "", e),
		ExperimentEtag: e.Etag, LiveEtag: liveEtag, Thresholds: th,
		Stats: Stats{Experiment: e.Name, ExperimentEtag: e.Etag, Replayed: Tally{Transitions: []Transition{}}},
	}
	s.Stats.Transitions = []Transition{}
	if e.PreviewMetadata != nil {
		s.State = e.PreviewMetadata.State
	}
	if !e.Previewed {
		s.NotPreviewed = e.Reason
	}
	src := e.Source
	s.Source = &src
	s.ListChanges = e.ListChanges
	for _, st := range merged {
		if st.Experiment == e.Name && st.ExperimentEtag == e.Etag {
			s.Stats = st
		}
	}
	if s.NotPreviewed == "" && s.Stats.Refused != "" {
		s.NotPreviewed = s.Stats.Refused // ACTIVE, but some nodes refuse it
	}
	s.Failing, s.Reason = th.Check(s.Stats)
	s.Enforced = EnforcedRules(e.Policy, merged)
	return s
}

func kindOf(hasLive bool, e *Experiment) Kind {
	switch {
	case !hasLive:
		return KindNewPolicy
	case IsNoOp(e.Policy):
		return KindDeletion
	}
	return KindUpdate
}

// outcomeOf names a decision for people: "DENY (rule-name)" or
// "ALLOW (default)".
func outcomeOf(v engine.Verdict, rule string) string {
	if rule == "" {
		return string(v) + " (default)"
	}
	return string(v) + " (" + rule + ")"
}
