package api

import (
	"net/http"
	"strconv"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
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
