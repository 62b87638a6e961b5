package api

import (
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// generationResource is a generation as GET /v1/generations/{n} shows it,
// kept when this node can still answer requests pinned to it.
func (s *clusterAPI) generationResource(g raftstore.Generation) apiv1.Generation {
	return apiv1.FromGeneration(g, s.gens.Get(g.Number) != nil)
}

// listGenerations answers GET /v1/generations, newest first.
func (s *clusterAPI) listGenerations(w http.ResponseWriter, r *http.Request) {
	st := s.cluster.State()
	nums := st.GenerationNumbers()
	resp := apiv1.GenerationList{Generations: make([]apiv1.Generation, 0, len(nums))}
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

// nodeResource is a node as GET /v1/nodes/{id} and /v1/status show it,
// with what only this node knows: who leads, why a node is held, and its
// own generation and applied index right now.
func (s *nodes) nodeResource(n raftstore.Node, st *raftstore.State, v cluster.View) apiv1.Node {
	res := apiv1.FromNode(n, v.Nodes[n.ID])
	res.Leader, res.HeldReasons = n.ID == s.cluster.Leader(), s.cluster.HeldReasons(n, v)
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

func (s *nodes) nodeResources(st *raftstore.State, v cluster.View) []apiv1.Node {
	out := make([]apiv1.Node, 0, len(st.Nodes))
	for _, id := range slices.Sorted(maps.Keys(st.Nodes)) {
		out = append(out, s.nodeResource(st.Nodes[id], st, v))
	}
	return out
}

// listNodes answers GET /v1/nodes, by id.
func (s *nodes) listNodes(w http.ResponseWriter, r *http.Request) {
	st := s.cluster.State()
	s.writeValue(w, r, apiv1.NodeList{Nodes: s.nodeResources(st, s.cluster.View())})
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
