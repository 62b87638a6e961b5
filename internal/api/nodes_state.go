package api

import (
	"context"
	"net/http"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/jsonenc"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// nodesVerbPrefix is the prefix of the custom methods on the nodes
// collection (POST /v1/nodes:changeState, :healthCheck).
const nodesVerbPrefix = "/v1/nodes:"

// NodeState tells the decision path the state this node acts on (ONAP's
// PDP state, DESIGN.md "Node states"). It is read on every decision, so
// implementations answer from an atomic, never from the replicated state.
type NodeState interface {
	NodeState() raftstore.NodeState
}

// mode is the state decisions follow: ACTIVE without a NodeState.
func (s *decisions) mode() raftstore.NodeState {
	if s.states == nil {
		return raftstore.NodeActive
	}
	return s.states.NodeState()
}

// refuses reports whether a node in state m answers no decisions: PASSIVE,
// or TERMINATED by an admin and about to exit.
func refuses(m raftstore.NodeState) bool {
	return m == raftstore.NodePassive || m == raftstore.NodeTerminated
}

// errPassive is the answer of a PASSIVE node to a decision or /readyz: 503,
// so that a load balancer drains it.
func errPassive() error {
	return errorf(errs.Unavailable, "this node is PASSIVE (or TERMINATED): it serves no decisions until an admin sets it ACTIVE or TEST")
}

// lookupServed is lookup for a decision: a policy of another node group
// is not served here (ONAP: a PDP group's policies are deployed to its
// PDPs only), and answers as unknown, with the group that serves it.
func (s *decisions) lookupServed(snap *Snapshot, name string) (*engine.CompiledPolicy, error) {
	cp, err := lookup(snap, name)
	if err != nil || s.group == "" {
		return cp, err
	}
	if g := cp.Source().Group; g != s.group && (g != "" || s.group != defaultGroup) {
		return nil, errorf(errs.NotFound, "policy %q is served by the nodes of group %q; this node is in group %q",
			"policies/"+name, g, s.group)
	}
	return cp, nil
}

// defaultGroup is the group of a policy without a group key.
const defaultGroup = "default"

// outOfRotation says why /readyz must fail although a generation is
// loaded: the node is PASSIVE, or it serves an older generation than the
// active one (it could not load it, or was left behind by the leader) and
// is not SAFE, which stays behind on purpose, or the leader found it does
// not follow the raft log (its own state cannot tell it is behind; the
// finding comes with the answers to its heartbeats). It rejoins rotation
// as soon as it has applied what it was missing and serves the active
// generation.
func (s *nodes) outOfRotation(snap *Snapshot) error {
	mode := s.mode()
	if refuses(mode) {
		return errPassive()
	}
	if s.cluster == nil || mode == raftstore.NodeSafe {
		return nil
	}
	st := s.cluster.State()
	if lag := s.cluster.View().Nodes[s.cluster.NodeID()].NotFollowing; lag != nil && st.LastIndex < lag.LeaderIndex &&
		s.cluster.Leader() != s.cluster.NodeID() {
		return errorf(errs.Unavailable, "this node is %s (the leader's finding; it serves generation %d): out of rotation until it catches up",
			lag.Reason(), snap.Generation)
	}
	if st.Active <= snap.Generation {
		return nil
	}
	for _, f := range loadFailures(st, s.cluster.NodeID(), snap.Generation) {
		if f.Generation == st.Active {
			return errorf(errs.Unavailable, "this node serves generation %d but generation %d is active, which it cannot load (%s): out of rotation until it loads a later one",
				snap.Generation, st.Active, f.Errors[0])
		}
	}
	return errorf(errs.Unavailable, "this node serves generation %d but generation %d is active: out of rotation until it loads it",
		snap.Generation, st.Active)
}

// loadFailures are the active and staged generations newer than served
// that node id reported it cannot load, with its errors: why the node is
// behind, left out of rotation by the leader rather than holding the
// others back. A node that loads a later generation has none.
func loadFailures(st *raftstore.State, id string, served uint64) []apiv1.LoadFailure {
	var out []apiv1.LoadFailure
	for _, n := range []uint64{st.Active, st.Staged} {
		g, ok := st.Generation(n)
		if errs := g.NodeErrors[id]; ok && n > served && len(errs) > 0 {
			out = append(out, apiv1.LoadFailure{Generation: n, Errors: errs})
		}
	}
	return out
}

// sumStatistics adds up the last statistics of the registered nodes (per
// node in each node's status).
func sumStatistics(st *raftstore.State, v cluster.View) cluster.Statistics {
	var sum cluster.Statistics
	for id := range st.Nodes {
		if s := v.Nodes[id].Status; s != nil {
			sum = sum.Add(s.Statistics)
		}
	}
	return sum
}

// routeNodesVerb handles POST /v1/nodes:{verb}. Both verbs are admin
// operations (ONAP's PAP calls them), as the route table says too.
func (s *nodes) routeNodesVerb(w http.ResponseWriter, r *http.Request, verb string) {
	handlers := map[string]func(context.Context, http.ResponseWriter, *http.Request){
		"changeState": s.changeState,
		"healthCheck": s.healthCheck,
	}
	h, ok := handlers[verb]
	if !ok || s.cluster == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s", r.URL.Path))
		return
	}
	if !s.allow(w, r, http.MethodPost) || !s.admit(w, r) {
		return
	}
	ctx := r.Context()
	ctx = s.forwardedContext(ctx, r)
	// A follower forwards the admin's own credential, which the leader
	// checks (with [tls] nodes send no token of their own).
	ctx = cluster.WithCredential(ctx, r.Header.Get("Authorization"))
	h(ctx, w, r)
}

// changeState answers POST /v1/nodes:changeState with the nodes it
// changed. It goes through leaderOnly like every write, so that a
// follower answers once it shows the new states itself.
func (s *nodes) changeState(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	var req cluster.ChangeStateRequest
	raw, err := s.decodeRaw(w, r, &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.leaderOnly(ctx, w, r, raw, func(ctx context.Context) (any, error) {
		res, err := s.cluster.ChangeState(ctx, req)
		if err != nil {
			return nil, err
		}
		return apiv1.FromChangeState(res), nil
	})
}

// healthCheck answers POST /v1/nodes:healthCheck: HEALTHY, NOT_HEALTHY
// (with reasons) or UNREACHABLE for each node in scope.
func (s *nodes) healthCheck(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	var req cluster.HealthCheckRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.cluster.HealthCheck(ctx, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeValue(w, r, apiv1.FromHealthCheck(res))
}

// writeUnenforced answers a decision of a TEST node: evaluated, logged and
// counted as usual, but always ALLOW, with "enforced":false and the
// decision the node would have enforced (AWS WAF's count mode for a whole
// node), so a new node or region is observed on real traffic first.
func (s *decisions) writeUnenforced(w http.ResponseWriter, name string, d *engine.Decision, generation uint64) {
	s.logUnenforced(name, d, generation)
	shown := *d
	shown.Verdict = engine.Allow
	buf := s.getBuf()
	b := appendDecision(buf.AvailableBuffer(), &shown, generation)
	b = append(b[:len(b)-2], `,"enforced":false,"evaluatedDecision":`...) // drop "}\n"
	b = jsonenc.AppendString(b, string(d.Verdict))
	buf.Write(append(b, "}\n"...))
	writeJSON(w, http.StatusOK, buf.Bytes())
	s.putBuf(buf)
}

// unenforcedLines bounds the TEST decisions logged a second: each is a
// line an operator chose to watch, but traffic decides how many there are,
// and the log shares its disk with raft.
const unenforcedLines = 200

// logUnenforced logs one TEST decision (no request content, only its
// outcome; a match error without the values it quotes), at most unenforcedLines a second; the next line let through
// counts the ones held back.
func (s *decisions) logUnenforced(name string, d *engine.Decision, generation uint64) {
	ok, held := s.unenforcedLog.Allow()
	if !ok {
		return
	}
	s.log.Info("decision not enforced (node in TEST)", "policy", name, "decision", d.Verdict, "rule", d.Rule, "not_logged_before", held,
		"generation", generation, "error", engine.RedactMatchError(d.Error))
}
