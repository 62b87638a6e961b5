package api

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// versionStatus fills the cluster version and the features it enables.
func (s *clusterAPI) versionStatus(res *apiv1.Status) {
	v := s.cluster.Version()
	res.ClusterVersion = v.String()
	res.Features = []apiv1.Feature{}
	for _, f := range raftstore.Features() {
		res.Features = append(res.Features, apiv1.Feature{Name: f.Name, Since: f.Since.String(), Enabled: !v.Less(f.Since)})
	}
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
	res := apiv1.Status{
		NodeID: s.cluster.NodeID(), Leader: s.cluster.Leader(), RaftState: s.cluster.RaftState(),
		ActiveGeneration: st.Active, Source: apiv1.FromSource(v.Source),
		Policies: conditions(st, v, policyGroups(s.gens.Current())), Experiments: s.statusExperiments(st), Nodes: s.nodeResources(st, v),
	}
	if g, ok := st.ActiveGeneration(); ok {
		res.Commit, res.Author = g.Commit, g.Author
	}
	if s.parts != nil {
		res.Parts = apiv1.FromParts(s.parts())
	}
	res.Statistics = apiv1.FromStatistics(sumStatistics(st, v))
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
	// Branches are the replicated branch records by record name
	// ("branches/<branch>"); the API maps them to its view
	// (apiv1.FromBranch), so the record is never its JSON.
	Branches(st *raftstore.State) map[string]raftstore.BranchRecord
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

// statusExperiments are the leader's branch records and the AIP-236
// experiments of the replicated state, as apiv1 maps them.
func (s *clusterAPI) statusExperiments(st *raftstore.State) []apiv1.StatusExperiment {
	var branches map[string]raftstore.BranchRecord
	if s.records != nil {
		branches = s.records.Branches(st)
	}
	exps, _ := preview.FromState(st)
	return apiv1.FromStatusExperiments(branches, exps)
}

// policyConditions accumulates conditions by policy name.
type policyConditions map[string]*apiv1.PolicyStatus

func (pc policyConditions) add(name string, c apiv1.Condition) {
	p := pc.get(name)
	c.Status = "True"
	p.Conditions = append(p.Conditions, c)
}

func (pc policyConditions) get(name string) *apiv1.PolicyStatus {
	p, ok := pc[name]
	if !ok {
		p = &apiv1.PolicyStatus{Name: "policies/" + name, Conditions: []apiv1.Condition{}}
		pc[name] = p
	}
	return p
}

// conditions derives every policy's conditions from the replicated state
// and the leader's view, in name order. groupOf (nil: unknown) names the
// group serving a policy, so that Ready lists only the nodes of that group.
func conditions(st *raftstore.State, v cluster.View, groupOf groupOfFunc) []apiv1.PolicyStatus {
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
			pc.add(name, apiv1.Condition{Type: condPullError, Message: v.Source.Error, LastTransitionTime: v.Source.Time})
		}
	}
	out := make([]apiv1.PolicyStatus, 0, len(pc))
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
		pc.add(name, apiv1.Condition{Type: condValid, Generation: g.Number, LastTransitionTime: g.CreateTime})
		for _, id := range ready {
			if !groupOf.serves(nodes[id], name) {
				continue
			}
			pc.add(name, apiv1.Condition{Type: condReady, NodeID: id, Generation: g.Number,
				LastTransitionTime: g.ReadyNodes[id]})
		}
		if g.State == raftstore.GenerationActive {
			pc.add(name, apiv1.Condition{Type: condActive, Generation: g.Number, LastTransitionTime: g.ActivateTime})
		} else {
			pc.add(name, apiv1.Condition{Type: condPending, Generation: g.Number, LastTransitionTime: g.CreateTime,
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
	for _, e := range apiv1.GenerationErrors(g) {
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
		pc.add(name, apiv1.Condition{Type: condInvalid, Generation: g.Number, LastTransitionTime: g.StateTime,
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
