package preview

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/policy"
)

// AIP-236 names. The resource and metadata type names follow the
// convention RegularResourceType + "Experiment" / + "PreviewMetadata";
// they appear in operation @type URLs and in docs/preview.md.
const (
	ResourceType = "PolicyExperiment"
	MetadataType = "PolicyPreviewMetadata"
	// LogPrefix is the system-generated log_prefix: a constant for every
	// policy experiment, so that searching logs for it isolates previews.
	LogPrefix = "PolicyPreviewLog"
	// DefaultMaxPerPolicy is the documented cap on previewed experiments
	// per live policy (config preview.max_experiments_per_policy).
	DefaultMaxPerPolicy = 10
)

// State is the state of previewing an experiment.
type State string

// The preview states. STATE_UNDEFINED is never stored: an experiment that
// was never started has no metadata at all.
const (
	Active    State = "ACTIVE"
	Suspended State = "SUSPENDED"
)

// Metadata is PolicyPreviewMetadata. Every field is output only: the
// methods set them, and ParseInput drops them from client bodies.
type Metadata struct {
	State     State     `json:"state"`
	LogPrefix string    `json:"logPrefix"`
	StartTime time.Time `json:"startTime,omitzero"`
	StopTime  time.Time `json:"stopTime,omitzero"`
	// StopReason says why the system suspended the preview (autoStop);
	// empty when a person stopped it. Cleared by startPreview.
	StopReason string `json:"stopReason,omitempty"`
}

// SourceKind says where an experiment came from.
type SourceKind string

// The sources of experiments.
const (
	SourcePullRequest SourceKind = "pull_request"
	SourceBranch      SourceKind = "branch"
	SourceAPI         SourceKind = "api"
)

// Source is the origin of an experiment: a pull request, a branch, or an
// API call. HeadCommit is the commit the policy was read from, which a
// git-backed commit merges.
type Source struct {
	Kind       SourceKind `json:"kind"`
	Number     int        `json:"number,omitempty"`
	Branch     string     `json:"branch,omitempty"`
	HeadCommit string     `json:"headCommit,omitempty"`
	URL        string     `json:"url,omitempty"`
}

// Experiment is a PolicyExperiment: a proposed version of one live policy,
// evaluated beside it on live traffic. Values are treated as immutable:
// every method returns a new Experiment and leaves its input untouched,
// and Policy is shared between copies, never modified.
type Experiment struct {
	// Name is "policies/{policy}/experiments/{id}".
	Name string `json:"name"`
	// Etag is the etag of Policy: the same content gives the same etag,
	// which is what commit checks.
	Etag string `json:"etag"`
	// Policy is the full proposed policy; its Name is the live policy's.
	Policy *policy.Policy `json:"policy"`
	// PreviewMetadata is nil until the first startPreview.
	PreviewMetadata *Metadata         `json:"previewMetadata,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	// AutoStop, set by the client, ends the preview by itself; nil uses
	// the configured default.
	AutoStop *AutoStop `json:"autoStop,omitempty"`
	Source   Source    `json:"source"`
	// Previewed is false when the experiment is over the cap; Reason says so.
	Previewed bool   `json:"previewed"`
	Reason    string `json:"notPreviewedReason,omitempty"`
	// Conflict, on a branch or pull request experiment, says why its
	// source cannot be merged into the live branch (SetConflict).
	Conflict string `json:"conflict,omitempty"`
	// Validation is the verdict on the tree the live branch would hold if
	// the experiment were committed: the checks of a main commit.
	Validation *Validation `json:"validation,omitempty"`
	// ListChunks are the chunks of the lists the experiment's tree
	// changes, by list content hash (raftstore.PutExperiment.Lists): what
	// every node compiles those lists from. Not shown by the API.
	ListChunks map[string][]string `json:"listChunks,omitempty"`
	// ListChanges say, per list the experiment changes, the entries
	// added and removed against the live tree.
	ListChanges []ListChange `json:"listChanges,omitempty"`
	CreateTime  time.Time    `json:"createTime"`
	UpdateTime  time.Time    `json:"updateTime"`
}

// Validation is whether a tree passed the leader's checks (load, merge,
// compile, every policy test, size), with the problems when not.
type Validation struct {
	Valid  bool     `json:"valid"`
	Errors []string `json:"errors"`
	// Tests counts the experiment's policy tests (the live policy's,
	// unless the experiment's body gave its own) and how many pass; nil
	// when the policy did not compile, so none could run.
	Tests *TestCounts `json:"tests,omitempty"`
}

// TestCounts is how many of a policy's tests ran and how many passed.
type TestCounts struct {
	Total  int `json:"total"`
	Passed int `json:"passed"`
}

// IsActive reports whether the experiment is being previewed now.
func (e *Experiment) IsActive() bool {
	return e != nil && e.Previewed && e.PreviewMetadata != nil && e.PreviewMetadata.State == Active
}

// PolicyName returns the name of the live policy the experiment is for.
func (e *Experiment) PolicyName() string {
	if p, _, ok := ParseRuleName(e.Name); ok {
		return p
	}
	p, _, _ := ParseName(e.Name)
	return p
}

// clone copies e deeply enough that changing the copy's metadata or
// annotations leaves e alone.
func (e *Experiment) clone() *Experiment {
	c := *e
	if e.PreviewMetadata != nil {
		md := *e.PreviewMetadata
		c.PreviewMetadata = &md
	}
	c.Annotations = maps.Clone(e.Annotations)
	if e.AutoStop != nil {
		a := *e.AutoStop
		c.AutoStop = &a
	}
	return &c
}

// idRE is the syntax of an experiment id: that of a policy name, so ids
// fit in URLs and resource names unescaped.
var idRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// ResourceName returns "policies/{policyName}/experiments/{id}".
func ResourceName(policyName, id string) string {
	return "policies/" + policyName + "/experiments/" + id
}

// ParseName splits an experiment resource name into policy and id.
func ParseName(name string) (policyName, id string, err error) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "policies" || parts[2] != "experiments" ||
		!idRE.MatchString(parts[1]) || !idRE.MatchString(parts[3]) {
		return "", "", errorf(InvalidArgument,
			"%q is not an experiment name: want policies/{policy}/experiments/{id}", name)
	}
	return parts[1], parts[3], nil
}

// parsePolicy checks "policies/{policy}" and returns the policy name.
func parsePolicy(parent string) (string, error) {
	name, ok := strings.CutPrefix(parent, "policies/")
	if !ok || !idRE.MatchString(name) {
		return "", errorf(InvalidArgument, "%q is not a policy name: want policies/{policy}", parent)
	}
	return name, nil
}

// ExperimentID returns the id an experiment from src gets: "pr-<n>" for a
// pull request, "branch-<name>" for a branch, and userID (checked against
// [a-z][a-z0-9-]{0,62}) for the API.
func ExperimentID(src Source, userID string) (string, error) {
	switch src.Kind {
	case SourcePullRequest:
		if src.Number <= 0 {
			return "", errorf(InvalidArgument, "pull request number must be positive, not %d", src.Number)
		}
		return "pr-" + strconv.Itoa(src.Number), nil
	case SourceBranch:
		return branchID(src.Branch)
	case SourceAPI, "":
		if !idRE.MatchString(userID) {
			return "", errorf(InvalidArgument,
				"experimentId %q must match [a-z][a-z0-9-]{0,62} (or leave experimentId out: the server then picks one)", userID)
		}
		return userID, nil
	}
	return "", errorf(InvalidArgument, "unknown source kind %q", src.Kind)
}

// GeneratedID is the id the server gives an API experiment created
// without experimentId (AIP-133): "exp-" and ten hex digits derived from
// the policy, the time and a counter, so that the leader decides it
// before proposing and it is free among existing.
func GeneratedID(existing []*Experiment, polName string, now time.Time) string {
	for n := 0; ; n++ {
		sum := sha256.Sum256([]byte(polName + "\x00" + strconv.FormatInt(now.UnixNano(), 10) + "\x00" + strconv.Itoa(n)))
		id := "exp-" + hex.EncodeToString(sum[:5])
		if find(existing, ResourceName(polName, id)) == nil {
			return id
		}
	}
}

// branchID sanitises a branch name into "branch-<name>". A branch name
// that is already lower-case letters, digits and dashes is kept as is;
// any other gets a short hash of the original appended, so that
// "feature/x" and "feature-x" never share an experiment.
func branchID(branch string) (string, error) {
	const prefix, maxLen, hashLen = "branch-", 63, 8
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(branch) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if ok {
			b.WriteRune(r)
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
		}
		dash = !ok
	}
	s := strings.TrimRight(b.String(), "-")
	if s == "" {
		return "", errorf(InvalidArgument, "branch name %q has no letters or digits", branch)
	}
	if s == branch && len(prefix)+len(s) <= maxLen {
		return prefix + s, nil
	}
	sum := sha256.Sum256([]byte(branch))
	room := maxLen - len(prefix) - 1 - hashLen
	s = strings.TrimRight(s[:min(len(s), room)], "-")
	return prefix + s + "-" + hex.EncodeToString(sum[:])[:hashLen], nil
}

// NoOp returns the policy that previews a deletion of live (or stands in
// for a live policy that does not exist yet): the full live payload,
// name included, with no rules and default_action allow, so that every
// request is allowed as if the policy were not there.
func NoOp(live *policy.Policy, name string) *policy.Policy {
	p := &policy.Policy{Name: name, Group: "default", OnError: policy.OnErrorDeny}
	if live != nil {
		c := *live
		p = &c
	}
	p.DefaultAction = policy.ActionAllow
	p.Rules = []policy.Rule{}
	p.Tests = nil
	return p
}

// public is e as the API shows it: the embedded policy named by its
// resource name, "policies/{policy}", as the live policy is (AIP-236), so
// that it posts back unchanged. The stored form keeps the short name the
// etag is computed with.
func (e *Experiment) public() *Experiment {
	if e == nil || e.Policy == nil || (strings.HasPrefix(e.Policy.Name, "policies/") && e.ListChunks == nil) {
		return e
	}
	p, c := *e.Policy, *e
	p.Name = "policies/" + strings.TrimPrefix(p.Name, "policies/")
	c.Policy = &p
	c.ListChunks = nil
	return &c
}

// IsNoOp reports whether p allows everything without a rule: an
// experiment with such a policy previews the deletion of the live one.
func IsNoOp(p *policy.Policy) bool {
	return p != nil && len(p.Rules) == 0 && p.DefaultAction == policy.ActionAllow
}

// View is an experiment as the API shows it: the resource and, beside it,
// the stats of its current version (CONTRACT §4 `stats`) and, when
// thresholds are configured for its policy, the judgement of those stats.
type View struct {
	*Experiment
	Stats   *Stats   `json:"stats,omitempty"`
	Summary *Verdict `json:"summary,omitempty"`
}

// Verdict is how an experiment's stats compare with its policy's
// thresholds ([preview.thresholds]): Failing with a one-line Reason when a
// ratio is over its limit (Thresholds.Check).
type Verdict struct {
	Thresholds Thresholds `json:"thresholds"`
	Failing    bool       `json:"failing"`
	Reason     string     `json:"reason,omitempty"`
}

// ViewOf pairs e with its entry in merged (see Merge), if any.
func ViewOf(e *Experiment, merged []Stats) View {
	v := View{Experiment: e.public()}
	for i := range merged {
		if merged[i].Experiment == e.Name && merged[i].ExperimentEtag == e.Etag {
			s := merged[i]
			v.Stats = &s
		}
	}
	return v
}

// ViewWith is ViewOf judged against th (no Summary when th sets no limit).
func ViewWith(e *Experiment, merged []Stats, th Thresholds) View {
	v := ViewOf(e, merged)
	if th.IsZero() {
		return v
	}
	var st Stats
	if v.Stats != nil {
		st = *v.Stats
	}
	failing, reason := th.Check(st)
	v.Summary = &Verdict{Thresholds: th, Failing: failing, Reason: reason}
	return v
}

// WithoutSamples is v without the sample requests of its stats: counts
// and rules only. Samples are redacted copies of users' requests, so an
// API read shows them only when asked for (?view=FULL), which the API can
// then require a role for.
func (v View) WithoutSamples() View {
	if v.Stats != nil && v.Stats.Samples != nil {
		s := *v.Stats
		s.Samples = nil
		v.Stats = &s
	}
	return v
}
