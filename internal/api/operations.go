package api

import (
	"net/http"
	"strings"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/preview"
)

// operationsPrefix is where long-running operations are read.
const operationsPrefix = "/v1/operations/"

// getOperation answers GET /v1/operations/{id} from the replicated state,
// so any node answers it.
func (s *Server) getOperation(w http.ResponseWriter, r *http.Request, id string) {
	if s.cluster == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (%s)", r.URL.Path, withoutClusterMsg))
		return
	}
	if !s.allow(w, r, http.MethodGet) {
		return
	}
	id = strings.TrimPrefix(id, "operations/")
	doc, ok := s.cluster.State().Operations[id]
	if !ok && id != "" {
		// Just created on the leader, not applied here yet: ask the leader.
		a, asked, err := s.cluster.ForwardRead(forwardedContext(r.Context(), r), callOf(r, nil))
		switch {
		case asked && err != nil:
			s.fail(w, r, err)
			return
		case asked:
			writeAnswer(w, &a)
			return
		}
	}
	if !ok || id == "" {
		s.fail(w, r, errorf(errs.NotFound, "operation %q not found", "operations/"+id))
		return
	}
	op, err := preview.DecodeOperation(doc.Data)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeValue(w, r, op)
}
