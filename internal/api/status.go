package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// statusResource answers GET /v1/status (CONTRACT.md §4).
type statusResource struct {
	NodeID    string `json:"nodeId"`
	Leader    string `json:"leader"`
	RaftState string `json:"raftState"`
	// ActiveGeneration is the cluster's active generation as this node
	// has applied it; Commit is its commit.
	ActiveGeneration uint64 `json:"activeGeneration"`
	Commit           string `json:"commit"`
	// Author is its commit's author, when the generation records one.
	Author string `json:"author,omitempty"`
	// ServedGeneration is the generation this node answers from.
	ServedGeneration uint64               `json:"servedGeneration"`
	Source           cluster.SourceStatus `json:"source"`
	Policies         []policyStatus       `json:"policies"`
	Experiments      []json.RawMessage    `json:"experiments"`
	Nodes            []nodeResource       `json:"nodes"`
	// PreviewRules are the served policies' rules in preview with the
	// cluster's counts (no samples: GET /v1/policies/{p}?view=FULL).
	PreviewRules []preview.RuleView `json:"previewRules,omitempty"`
	// Parts are this node's long-running parts (loader, preview,
	// heartbeats, leader, github) and what each is doing.
	Parts map[string]lifecycle.Status `json:"parts,omitempty"`
	// Statistics sum the nodes' PDP statistics (nodes_state.go).
	Statistics cluster.Statistics `json:"statistics"`
	// ClusterVersion is the lowest release among the members; Features
	// says which of the releases' features the leader uses at it.
	ClusterVersion string          `json:"clusterVersion"`
	Features       []featureStatus `json:"features"`
}

// featureStatus is one row of the feature table (raftstore.Features).
type featureStatus struct {
	Name    string `json:"name"`
	Since   string `json:"since"`
	Enabled bool   `json:"enabled"`
}

// versionStatus fills the cluster version and the features it enables.
func (s *clusterAPI) versionStatus(res *statusResource) {
	v := s.cluster.Version()
	res.ClusterVersion = v.String()
	res.Features = []featureStatus{}
	for _, f := range raftstore.Features() {
		res.Features = append(res.Features, featureStatus{Name: f.Name, Since: f.Since.String(), Enabled: !v.Less(f.Since)})
	}
}

// policyStatus is one policy with its status conditions (Kubewarden's
// policy lifecycle): Valid and Pending from the leader, Ready per node,
// Active with the generation, Invalid and PullError with the errors.
type policyStatus struct {
	Name string `json:"name"`
	// Etag is the etag of the active generation's version, "" when the
	// policy is not in it.
	Etag       string      `json:"etag"`
	Conditions []condition `json:"conditions"`
}

// condition is a Kubernetes-style status condition, extended with the node
// and the generation it is about.
type condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	NodeID             string    `json:"nodeId,omitempty"`
	Generation         uint64    `json:"generation,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime,omitzero"`
}

// Condition types.
const (
	condPending   = "Pending"
	condValid     = "Valid"
	condInvalid   = "Invalid"
	condPullError = "PullError"
	condReady     = "Ready"
	condActive    = "Active"
)

// status answers GET /v1/status.
func (s *clusterAPI) status(w http.ResponseWriter, r *http.Request) {
	st, v := s.cluster.State(), s.cluster.View()
	v.Source = s.sourceStatus(st, v.Source)
	res := statusResource{
		NodeID: s.cluster.NodeID(), Leader: s.cluster.Leader(), RaftState: s.cluster.RaftState(),
		ActiveGeneration: st.Active, Source: v.Source,
		Policies: conditions(st, v, policyGroups(s.gens.Current())), Experiments: append(s.branchExperiments(st), aipExperiments(st)...), Nodes: s.nodeResources(st, v),
	}
	if g, ok := st.ActiveGeneration(); ok {
		res.Commit, res.Author = g.Commit, g.Author
	}
	if s.parts != nil {
		res.Parts = s.parts()
	}
	res.Statistics = sumStatistics(st, v)
	s.versionStatus(&res)
	if cur := s.gens.Current(); cur != nil {
		res.ServedGeneration = cur.Generation
		res.PreviewRules = s.allPreviewRules(cur)
	}
	s.writeStatus(w, r, res) // status_etag.go
}

// LeaderRecords reads what the leader loop records beside the
// generations (internal/reconcile.StatusRecords), from the replicated
// state, so every node shows it.
type LeaderRecords interface {
	// PullError is the policy source's replicated pull error, if any.
	PullError(st *raftstore.State) (msg string, since time.Time, ok bool)
	// Branches renders each branch experiment's record as JSON, by name.
	Branches(st *raftstore.State) []json.RawMessage
}

// sourceStatus is the leader's last read of the source (from the cluster
// view), with the replicated PullError record winning: it reaches every
// node through the log, survives a change of leader, and is there before
// the first heartbeat answer.
func (s *clusterAPI) sourceStatus(st *raftstore.State, v cluster.SourceStatus) cluster.SourceStatus {
	if s.records == nil {
		return v
	}
	if msg, since, ok := s.records.PullError(st); ok {
		v.Error, v.Time = msg, since
	}
	return v
}

// branchExperiments renders the leader's branch records, by name.
func (s *clusterAPI) branchExperiments(st *raftstore.State) []json.RawMessage {
	if s.records == nil {
		return []json.RawMessage{}
	}
	return s.records.Branches(st)
}

// experimentStatus is one AIP-236 experiment in /v1/status (kind
// "experiment"): its name, etag, preview state (absent before the first
// startPreview), whether it is previewed (false over the cap) and what it
// comes from.
type experimentStatus struct {
	Name      string        `json:"name"`
	Kind      string        `json:"kind"`
	Etag      string        `json:"etag"`
	State     preview.State `json:"state,omitempty"`
	Previewed bool          `json:"previewed"`
	// StopReason is why the system suspended it (autoStop).
	StopReason string `json:"stopReason,omitempty"`
	// Valid is the experiment's validation (absent when none was made);
	// Conflict says why its source cannot be merged into main.
	Valid    *bool        `json:"valid,omitempty"`
	Conflict string       `json:"conflict,omitempty"`
	Source   statusSource `json:"source"`
}

// statusSource is what an experiment comes from.
type statusSource struct {
	Kind       preview.SourceKind `json:"kind"`
	Number     int                `json:"number,omitempty"`
	Branch     string             `json:"branch,omitempty"`
	HeadCommit string             `json:"headCommit,omitempty"`
}

// aipExperiments renders the AIP-236 experiments of the replicated state
// ("policies/{policy}/experiments/{id}"), by name.
func aipExperiments(st *raftstore.State) []json.RawMessage {
	exps, _ := preview.FromState(st)
	slices.SortFunc(exps, func(a, b *preview.Experiment) int { return strings.Compare(a.Name, b.Name) })
	out := make([]json.RawMessage, 0, len(exps))
	for _, e := range exps {
		es := experimentStatus{Name: e.Name, Kind: "experiment", Etag: e.Etag, Previewed: e.Previewed,
			Source: statusSource{Kind: e.Source.Kind, Number: e.Source.Number, Branch: e.Source.Branch,
				HeadCommit: e.Source.HeadCommit}}
		if e.PreviewMetadata != nil {
			es.State, es.StopReason = e.PreviewMetadata.State, e.PreviewMetadata.StopReason
		}
		if e.Validation != nil {
			es.Valid = &e.Validation.Valid
		}
		es.Conflict = e.Conflict
		if data, err := json.Marshal(es); err == nil {
			out = append(out, data)
		}
	}
	return out
}

// policyConditions accumulates conditions by policy name.
type policyConditions map[string]*policyStatus

func (pc policyConditions) add(name string, c condition) {
	p := pc.get(name)
	c.Status = "True"
	p.Conditions = append(p.Conditions, c)
}

func (pc policyConditions) get(name string) *policyStatus {
	p, ok := pc[name]
	if !ok {
		p = &policyStatus{Name: "policies/" + name, Conditions: []condition{}}
		pc[name] = p
	}
	return p
}

// conditions derives every policy's conditions from the replicated state
// and the leader's view, in name order. groupOf (nil: unknown) names the
// group serving a policy, so that Ready lists only the nodes of that group.
func conditions(st *raftstore.State, v cluster.View, groupOf groupOfFunc) []policyStatus {
	pc := policyConditions{}
	if g, ok := st.ActiveGeneration(); ok {
		for name, etag := range g.Etags {
			pc.get(name).Etag = etag
		}
		generationConditions(pc, g, st.Nodes, groupOf)
	}
	if g, ok := st.StagedGeneration(); ok {
		generationConditions(pc, g, st.Nodes, groupOf)
	}
	if g, ok := st.Generation(st.Highest); ok && g.State == raftstore.GenerationInvalid && !backToActive(st, v) {
		invalidConditions(pc, g)
	}
	if v.Source.Error != "" {
		for name := range pc {
			pc.add(name, condition{Type: condPullError, Message: v.Source.Error, LastTransitionTime: v.Source.Time})
		}
	}
	out := make([]policyStatus, 0, len(pc))
	for _, name := range slices.Sorted(maps.Keys(pc)) {
		out = append(out, *pc[name])
	}
	return out
}

// backToActive reports whether the leader last read the active
// generation's commit from the source: the invalid tree was reverted, and
// its Invalid condition is history (the generation record keeps it).
func backToActive(st *raftstore.State, v cluster.View) bool {
	g, ok := st.ActiveGeneration()
	return ok && v.Source.Commit != "" && v.Source.Commit == g.Commit
}

// generationConditions adds, for each policy of an active or staged
// generation: Valid (the leader validated it), Ready per node of the group
// that serves it (a node compiles only its group's policies), then Active
// or Pending.
func generationConditions(pc policyConditions, g raftstore.Generation, nodes map[string]raftstore.Node, groupOf groupOfFunc) {
	ready := slices.Sorted(maps.Keys(g.ReadyNodes))
	for name := range g.Etags {
		pc.add(name, condition{Type: condValid, Generation: g.Number, LastTransitionTime: g.CreateTime})
		for _, id := range ready {
			if !groupOf.serves(nodes[id], name) {
				continue
			}
			pc.add(name, condition{Type: condReady, NodeID: id, Generation: g.Number,
				LastTransitionTime: g.ReadyNodes[id]})
		}
		if g.State == raftstore.GenerationActive {
			pc.add(name, condition{Type: condActive, Generation: g.Number, LastTransitionTime: g.ActivateTime})
		} else {
			pc.add(name, condition{Type: condPending, Generation: g.Number, LastTransitionTime: g.CreateTime,
				Message: fmt.Sprintf("staged; %d of %d nodes ready", len(ready), len(nodes))})
		}
	}
}

// invalidConditions adds Invalid to the policies an invalid generation's
// errors name (an error's file path starts with the policy's directory),
// and to every known policy for errors that name none (a shared fragment,
// the size limit, a node's failure).
func invalidConditions(pc policyConditions, g raftstore.Generation) {
	byPolicy := map[string][]string{}
	var general []string
	for _, e := range generationErrors(g) {
		if name, ok := policyOfError(e); ok {
			byPolicy[name] = append(byPolicy[name], e)
		} else {
			general = append(general, e)
		}
	}
	for name := range byPolicy {
		pc.get(name)
	}
	for _, name := range slices.Sorted(maps.Keys(pc)) {
		msgs := append(byPolicy[name], general...)
		if len(msgs) == 0 {
			continue
		}
		pc.add(name, condition{Type: condInvalid, Generation: g.Number, LastTransitionTime: g.StateTime,
			Message: strings.Join(msgs, "\n")})
	}
}

// policyOfError returns the policy directory an error names, as in
// "web/policy.toml:3: message".
func policyOfError(e string) (string, bool) {
	dir, _, ok := strings.Cut(e, "/")
	if !ok || !validPolicyName(dir) {
		return "", false
	}
	return dir, true
}

// groupOfFunc names the group that serves a policy, false when unknown.
type groupOfFunc func(policy string) (string, bool)

// policyGroups is the groupOfFunc of the generation this node serves: the
// groups of the policies it compiled and of those it left to other groups.
func policyGroups(snap *Snapshot) groupOfFunc {
	if snap == nil || snap.Bundle == nil {
		return nil
	}
	return func(name string) (string, bool) {
		if cp, ok := snap.Bundle.Policy(name); ok {
			return cp.Source().Group, true
		}
		return snap.Bundle.ServedElsewhere(name)
	}
}

// serves reports whether node n serves policy name: true when the
// policy's group is unknown (a policy new in a staged generation).
func (f groupOfFunc) serves(n raftstore.Node, name string) bool {
	if f == nil {
		return true
	}
	g, ok := f(name)
	if !ok {
		return true
	}
	group := n.Group
	if group == "" {
		group = defaultGroup
	}
	return group == g
}
