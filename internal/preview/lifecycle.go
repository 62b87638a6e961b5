package preview

import (
	"maps"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/policy"
)

// The functions in this file are the AIP-236 state machine. They are pure:
// they read their arguments, never a clock or a store, and return new
// values, so the leader can decide a change (times included) before it
// proposes it to raft, and the FSM or a test can replay it.

// Settings are the [preview] settings the state machine needs.
type Settings struct {
	// MaxPerPolicy caps previewed experiments per live policy; 0 means
	// DefaultMaxPerPolicy.
	MaxPerPolicy int
	// MaxTotal caps the experiments the cluster stores, of every policy
	// and source, previewed or not: each is replicated state on every
	// node. 0 means DefaultMaxTotal.
	MaxTotal int
	// AutoStart makes the system start previewing on create and after
	// every update (see AutoStart).
	AutoStart bool
	// AutoStop is the default autoStop of experiments without their own
	// ([preview] auto_stop_after, auto_stop_requests).
	AutoStop AutoStop
}

// DefaultMaxTotal is the documented cluster-wide cap on experiments
// ([preview] max_experiments).
const DefaultMaxTotal = 200

func (s Settings) maxTotal() int {
	if s.MaxTotal <= 0 {
		return DefaultMaxTotal
	}
	return s.MaxTotal
}

func (s Settings) maxPerPolicy() int {
	if s.MaxPerPolicy <= 0 {
		return DefaultMaxPerPolicy
	}
	return s.MaxPerPolicy
}

// CreateRequest is what creating an experiment needs.
type CreateRequest struct {
	// Parent is the live policy's resource name, "policies/{policy}". The
	// live policy need not exist: that previews a new policy.
	Parent string
	// ExperimentID is the id for API-created experiments (empty: the
	// server picks one, GeneratedID); pull requests and branches derive
	// theirs (see ExperimentID).
	ExperimentID string
	// Policy is the full proposed policy. Its Name must be the parent's
	// (an empty Name is taken to mean it).
	Policy      *policy.Policy
	Annotations map[string]string
	Source      Source
	// AutoStop, when not nil, ends the preview by itself (see AutoStop).
	AutoStop *AutoStop
}

// Create makes a new experiment. existing holds the experiments already
// stored (those of other policies are ignored). Over the cap, an
// API-created experiment fails with RESOURCE_EXHAUSTED, while one from a
// pull request or branch is created with Previewed false and a reason, so
// that it is still listed and reported. preview_metadata stays absent:
// only StartPreview creates it.
func Create(existing []*Experiment, req CreateRequest, s Settings, now time.Time) (*Experiment, error) {
	polName, err := parsePolicy(req.Parent)
	if err != nil {
		return nil, err
	}
	if req.ExperimentID == "" && (req.Source.Kind == SourceAPI || req.Source.Kind == "") {
		req.ExperimentID = GeneratedID(existing, polName, now)
	}
	id, err := ExperimentID(req.Source, req.ExperimentID)
	if err != nil {
		return nil, err
	}
	p, err := checkPolicy(req.Policy, polName)
	if err != nil {
		return nil, err
	}
	if err := checkAnnotations(req.Annotations); err != nil {
		return nil, err
	}
	if req.AutoStop != nil {
		if err := req.AutoStop.check(); err != nil {
			return nil, err
		}
	}
	name := ResourceName(polName, id)
	if find(existing, name) != nil {
		return nil, errorf(AlreadyExists, "experiment %q already exists: update it instead", name)
	}
	if n := len(existing); n >= s.maxTotal() {
		return nil, errorf(ResourceExhausted,
			"the cluster holds %d experiments, the cap (preview.max_experiments): delete or commit one first", n)
	}
	e := &Experiment{
		Name: name, Etag: p.Etag(), Policy: p, Annotations: maps.Clone(req.Annotations),
		Source: req.Source, Previewed: true, CreateTime: now, UpdateTime: now, AutoStop: req.AutoStop,
	}
	if e.Source.Kind == "" {
		e.Source.Kind = SourceAPI
	}
	if n := countPreviewed(existing, polName); n >= s.maxPerPolicy() {
		if e.Source.Kind == SourceAPI {
			return nil, capError(polName, s)
		}
		e.Previewed, e.Reason = false, capError(polName, s).Msg
	}
	return e, nil
}

func capError(polName string, s Settings) *Error {
	return errorf(ResourceExhausted,
		"policy %q already has %d previewed experiments, the cap (preview.max_experiments_per_policy): delete or commit one first",
		"policies/"+polName, s.maxPerPolicy())
}

// checkPolicy enforces that the embedded policy keeps the live policy's
// name: an experiment is meant to replace that policy, and a live
// policy's name never changes.
func checkPolicy(p *policy.Policy, polName string) (*policy.Policy, error) {
	if p == nil {
		return nil, errorf(InvalidArgument, "policy is required: the full proposed policy")
	}
	if p.Name == "" {
		c := *p
		c.Name = polName
		return &c, nil
	}
	if p.Name != polName {
		return nil, errorf(InvalidArgument,
			"policy.name is %q but must be the live policy's name %q", p.Name, polName)
	}
	return p, nil
}

// Annotation limits: AIP-128 asks for "small amounts" of data, and every
// node holds every experiment's annotations.
const (
	maxAnnotationKey   = 253
	maxAnnotations     = 64
	maxAnnotationBytes = 64 << 10
)

func checkAnnotations(a map[string]string) error {
	if len(a) > maxAnnotations {
		return errorf(InvalidArgument, "%d annotations, more than %d", len(a), maxAnnotations)
	}
	total := 0
	for k, v := range a {
		if k == "" || len(k) > maxAnnotationKey {
			return errorf(InvalidArgument, "annotation keys must be 1 to %d bytes", maxAnnotationKey)
		}
		total += len(k) + len(v)
	}
	if total > maxAnnotationBytes {
		return errorf(InvalidArgument, "annotations hold %d bytes, more than %d", total, maxAnnotationBytes)
	}
	return nil
}

func find(exps []*Experiment, name string) *Experiment {
	for _, e := range exps {
		if e != nil && e.Name == name {
			return e
		}
	}
	return nil
}

func countPreviewed(exps []*Experiment, polName string) int {
	n := 0
	for _, e := range exps {
		if e != nil && e.Previewed && e.PolicyName() == polName {
			n++
		}
	}
	return n
}

// Get returns the experiment called name among exps, or NOT_FOUND.
func Get(exps []*Experiment, name string) (*Experiment, error) {
	if _, _, err := ParseName(name); err != nil {
		return nil, err
	}
	if e := find(exps, name); e != nil {
		return e, nil
	}
	return nil, errorf(NotFound, "experiment %q not found", name)
}

// UpdateRequest changes an experiment; zero fields are left as they are.
type UpdateRequest struct {
	// Policy is the new proposed policy; its name must not change.
	Policy *policy.Policy
	// Annotations, when not nil, replace the annotations.
	Annotations map[string]string
	// HeadCommit records the commit a pull request or branch moved to.
	HeadCommit string
	// Etag, when set, must match the experiment's (AIP-154).
	Etag string
	// AutoStop, when not nil, replaces the experiment's (a zero one
	// removes it: the default applies again).
	AutoStop *AutoStop
}

// Update changes an experiment. Because an experiment previews a
// replacement of the live policy, whose name never changes, the name
// inside the policy must not change either. An ACTIVE experiment becomes
// SUSPENDED (with stop_time now) so that logs of two versions are never
// mixed; with auto_start the caller then applies AutoStart. The etag is
// recomputed from the new policy.
func Update(e *Experiment, req UpdateRequest, now time.Time) (*Experiment, error) {
	if e == nil {
		return nil, errorf(NotFound, "experiment not found")
	}
	if err := checkEtag(e, req.Etag, false); err != nil {
		return nil, err
	}
	c := e.clone()
	if req.Policy != nil {
		p, err := checkPolicy(req.Policy, e.PolicyName())
		if err != nil {
			return nil, err
		}
		c.Policy, c.Etag = p, p.Etag()
	}
	if req.Annotations != nil {
		if err := checkAnnotations(req.Annotations); err != nil {
			return nil, err
		}
		c.Annotations = maps.Clone(req.Annotations)
	}
	if req.HeadCommit != "" {
		c.Source.HeadCommit = req.HeadCommit
	}
	if req.AutoStop != nil {
		if err := req.AutoStop.check(); err != nil {
			return nil, err
		}
		c.AutoStop = req.AutoStop
		if req.AutoStop.IsZero() {
			c.AutoStop = nil
		}
	}
	if c.PreviewMetadata != nil && c.PreviewMetadata.State == Active {
		c.PreviewMetadata.State, c.PreviewMetadata.StopTime = Suspended, now
	}
	c.UpdateTime = now
	return c, nil
}

// StartPreview starts (or restarts) previewing: state ACTIVE, start_time
// now and the constant log prefix, creating preview_metadata the first
// time. An experiment over the cap cannot start (RESOURCE_EXHAUSTED).
func StartPreview(e *Experiment, now time.Time) (*Experiment, error) {
	if e == nil {
		return nil, errorf(NotFound, "experiment not found")
	}
	if !e.Previewed {
		return nil, errorf(ResourceExhausted, "experiment %q cannot be previewed: %s", e.Name, e.Reason)
	}
	c := e.clone()
	if c.PreviewMetadata == nil {
		c.PreviewMetadata = &Metadata{}
	}
	c.PreviewMetadata.State = Active
	c.PreviewMetadata.StartTime = now
	c.PreviewMetadata.LogPrefix = LogPrefix
	c.PreviewMetadata.StopReason = ""
	c.UpdateTime = now
	return c, nil
}

// StopPreview stops previewing: state SUSPENDED, stop_time now. An
// experiment that was never started has no metadata to stop, and must
// keep none, so that is FAILED_PRECONDITION.
func StopPreview(e *Experiment, now time.Time) (*Experiment, error) {
	if e == nil {
		return nil, errorf(NotFound, "experiment not found")
	}
	if e.PreviewMetadata == nil {
		return nil, errorf(FailedPrecondition, "experiment %q was never started: call startPreview first", e.Name)
	}
	c := e.clone()
	c.PreviewMetadata.State = Suspended
	c.PreviewMetadata.StopTime = now
	c.PreviewMetadata.StopReason = ""
	c.UpdateTime = now
	return c, nil
}

// AutoStart is what the system does after a create or an update when
// preview.auto_start is on: it starts previewing any experiment that can
// be. Otherwise, or for an experiment over the cap, e is returned as is.
func AutoStart(e *Experiment, s Settings, now time.Time) *Experiment {
	if !s.AutoStart || e == nil || !e.Previewed || e.IsActive() {
		return e
	}
	c, err := StartPreview(e, now)
	if err != nil {
		return e
	}
	return c
}

// Delete checks that e may be deleted (it exists; etag, when given,
// matches) and returns it, the response of the delete operation.
func Delete(e *Experiment, etag string) (*Experiment, error) {
	if e == nil {
		return nil, errorf(NotFound, "experiment not found")
	}
	if err := checkEtag(e, etag, false); err != nil {
		return nil, err
	}
	return e, nil
}

// CascadeDelete returns the names of every experiment of the live policy
// polName: deleting a live policy deletes them all. A live policy changed
// to a no-op (see NoOp) is not deleted and keeps its experiments.
func CascadeDelete(exps []*Experiment, polName string) []string {
	var names []string
	for _, e := range exps {
		if e != nil && e.PolicyName() == polName {
			names = append(names, e.Name)
		}
	}
	return names
}

// normEtag accepts an etag with or without RFC 7232 quotes.
func normEtag(s string) string {
	return strings.Trim(strings.TrimPrefix(s, "W/"), `"`)
}

// checkEtag applies AIP-154: a missing etag is INVALID_ARGUMENT when
// required, and a stale one is ABORTED.
func checkEtag(e *Experiment, etag string, required bool) error {
	if etag == "" {
		if required {
			return errorf(InvalidArgument,
				"etag is required: give the etag of the experiment version you mean (from get)")
		}
		return nil
	}
	if normEtag(etag) != e.Etag {
		return errorf(Aborted, "etag %q is not the current etag of %q: get it again and retry", etag, e.Name)
	}
	return nil
}
