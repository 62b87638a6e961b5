package api

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// generationResource is a generation as GET /v1/generations/{n} shows it
// (CONTRACT.md §4). The bundle itself is never shown.
type generationResource struct {
	Generation uint64 `json:"generation"`
	Commit     string `json:"commit"`
	// Author is the commit's author, "Name <email>" as git has it;
	// RollbackOf the generation a revert restored and RequestedBy who
	// asked for it. Text from the repository, absent when unknown
	// (generations staged before every node ran 1.1.0).
	Author      string `json:"author,omitempty"`
	RollbackOf  uint64 `json:"rollbackOf,omitempty"`
	RequestedBy string `json:"requestedBy,omitempty"`
	// State is STAGED, ACTIVE, SUPERSEDED or INVALID. A generation that
	// was active and was replaced is SUPERSEDED with an activateTime.
	State        string            `json:"state"`
	CreateTime   time.Time         `json:"createTime"`
	ActivateTime time.Time         `json:"activateTime,omitzero"`
	StateTime    time.Time         `json:"stateTime"`
	ReadyNodes   []string          `json:"readyNodes"`
	Errors       []string          `json:"errors"`
	Etags        map[string]string `json:"etags"`
	// Kept: this node can answer requests pinned to this generation.
	Kept bool `json:"kept"`
}

type listGenerationsResponse struct {
	Generations []generationResource `json:"generations"`
}

// contractState names a raftstore generation state as CONTRACT.md does:
// RETIRED (active once, then replaced) is SUPERSEDED there.
func contractState(s raftstore.GenerationState) string {
	if s == raftstore.GenerationRetired {
		return string(raftstore.GenerationSuperseded)
	}
	return string(s)
}

func (s *clusterAPI) generationResource(g raftstore.Generation) generationResource {
	ready := slices.Sorted(maps.Keys(g.ReadyNodes))
	if ready == nil {
		ready = []string{}
	}
	etags := g.Etags
	if etags == nil {
		etags = map[string]string{}
	}
	return generationResource{
		Generation: g.Number, Commit: g.Commit, State: contractState(g.State),
		Author: g.Author, RollbackOf: g.RollbackOf, RequestedBy: g.RequestedBy,
		CreateTime: g.CreateTime, ActivateTime: g.ActivateTime, StateTime: g.StateTime,
		ReadyNodes: ready, Errors: generationErrors(g), Etags: etags,
		Kept: s.gens.Get(g.Number) != nil,
	}
}

// generationErrors lists the leader's errors, then each node's, prefixed
// with the node id, in node order.
func generationErrors(g raftstore.Generation) []string {
	out := append([]string{}, g.LeaderErrors...)
	for _, id := range slices.Sorted(maps.Keys(g.NodeErrors)) {
		for _, e := range g.NodeErrors[id] {
			out = append(out, "node "+id+": "+e)
		}
	}
	return out
}

// listGenerations answers GET /v1/generations, newest first.
func (s *clusterAPI) listGenerations(w http.ResponseWriter, r *http.Request) {
	st := s.cluster.State()
	nums := st.GenerationNumbers()
	resp := listGenerationsResponse{Generations: make([]generationResource, 0, len(nums))}
	for i := len(nums) - 1; i >= 0; i-- {
		resp.Generations = append(resp.Generations, s.generationResource(st.Generations[nums[i]]))
	}
	s.writeValue(w, r, resp)
}

// getGeneration answers GET /v1/generations/{n}.
func (s *clusterAPI) getGeneration(w http.ResponseWriter, r *http.Request, n uint64) {
	st := s.cluster.State()
	g, ok := st.Generation(n)
	if !ok {
		msg := "generation " + strconv.FormatUint(n, 10) + " is not known"
		if n <= st.Highest {
			msg += " any more (the cluster keeps the last " + strconv.Itoa(raftstore.HistoryLimit) + ")"
		}
		s.fail(w, r, errorf(errs.NotFound, "%s", msg))
		return
	}
	s.writeValue(w, r, s.generationResource(g))
}

// nodeResource is a node as GET /v1/nodes/{id} and /v1/status show it:
// the registry entry plus what the leader last heard from it.
type nodeResource struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
	Group    string `json:"group"`
	Subgroup string `json:"subgroup"`
	State    string `json:"state"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
	// Reachable: the leader heard a heartbeat recently, so it waits for
	// this node's Ready before activating a generation.
	Reachable     bool      `json:"reachable"`
	LastHeartbeat time.Time `json:"lastHeartbeat,omitzero"`
	// Generation is the generation the node answers decisions from, as
	// its last heartbeat said (this node's own: right now).
	Generation uint64    `json:"generation"`
	JoinTime   time.Time `json:"joinTime"`
	// Status is the node's last PDP_STATUS as the leader received it.
	Status *cluster.NodeStatus `json:"status,omitempty"`
	// HeldReasons say why a PASSIVE node is held: how its settings differ
	// from the leader's, a group or subgroup the cluster does not know
	// (cluster.HeldReasons).
	HeldReasons []string `json:"heldReasons,omitempty"`
	// LoadFailures are the active or staged generations, newer than the
	// one it serves, that the node reported it cannot load, with its
	// errors: the leader promotes without it and it is out of rotation
	// until it loads a later generation (nodes_state.go).
	LoadFailures []loadFailure `json:"loadFailures,omitempty"`
	// AppliedIndex is the raft index the node had applied at its last
	// heartbeat (this node's own: right now).
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
	// NotFollowing says why the leader promotes without a node that
	// heartbeats but has not applied the log for longer than the follow
	// timeout ("not following the raft log since …"): it is out of rotation
	// until it catches up.
	NotFollowing string `json:"notFollowing,omitempty"`
}

type listNodesResponse struct {
	Nodes []nodeResource `json:"nodes"`
}

func (s *nodes) nodeResource(n raftstore.Node, st *raftstore.State, v cluster.View) nodeResource {
	hb := v.Nodes[n.ID]
	res := nodeResource{
		ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Group: n.Group, Subgroup: n.Subgroup,
		State: string(n.State), Voter: n.Voter, Leader: n.ID == s.cluster.Leader(),
		Reachable: hb.Reachable, LastHeartbeat: hb.LastHeartbeat, Generation: hb.Generation, JoinTime: n.JoinTime,
		Status: hb.Status, HeldReasons: s.cluster.HeldReasons(n, v), AppliedIndex: hb.AppliedIndex,
	}
	if hb.NotFollowing != nil {
		res.NotFollowing = hb.NotFollowing.Reason()
	}
	if hb.Status != nil && hb.Status.State == raftstore.NodeTerminated {
		res.State = string(raftstore.NodeTerminated) // it said so in its last heartbeat
	}
	if n.ID == s.cluster.NodeID() {
		res.AppliedIndex = st.LastIndex
		res.Generation = 0
		if cur := s.gens.Current(); cur != nil {
			res.Generation = cur.Generation
		}
	}
	res.LoadFailures = loadFailures(st, n.ID, res.Generation)
	return res
}

func (s *nodes) nodeResources(st *raftstore.State, v cluster.View) []nodeResource {
	out := make([]nodeResource, 0, len(st.Nodes))
	for _, id := range slices.Sorted(maps.Keys(st.Nodes)) {
		out = append(out, s.nodeResource(st.Nodes[id], st, v))
	}
	return out
}

// listNodes answers GET /v1/nodes, by id.
func (s *nodes) listNodes(w http.ResponseWriter, r *http.Request) {
	st := s.cluster.State()
	s.writeValue(w, r, listNodesResponse{Nodes: s.nodeResources(st, s.cluster.View())})
}

// getNode answers GET /v1/nodes/{id}.
func (s *nodes) getNode(w http.ResponseWriter, r *http.Request, id string) {
	st := s.cluster.State()
	n, ok := st.Nodes[id]
	if !ok {
		s.fail(w, r, errorf(errs.NotFound, "node %q is not registered", id))
		return
	}
	s.writeValue(w, r, s.nodeResource(n, st, s.cluster.View()))
}
