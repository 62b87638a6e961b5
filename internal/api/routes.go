package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// Path prefixes of the routes. ServeMux wildcards must be whole path
// segments, and AIP custom methods put the verb after a colon in the last
// segment ("web:evaluate"), so the API parses its paths itself. That also
// keeps every answer, 404 and 405 included, an AIP-193 body.
const (
	policiesPath      = "/v1/policies"
	policiesPrefix    = "/v1/policies/"
	generationsList   = "/v1/generations"
	generationsPath   = "/v1/generations/"
	nodesList         = "/v1/nodes"
	nodesPrefix       = "/v1/nodes/"
	statusPath        = "/v1/status"
	withoutClusterMsg = "this server runs without a cluster"
)

// route routes a request the guard (auth.go) admitted. A panic in a handler becomes a 500 AIP-193
// answer and one log line, never a stack trace on the wire.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	defer s.recoverPanic(w, r)
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, policiesPrefix):
		s.routePolicy(w, r, s.gens.Current(), p[len(policiesPrefix):], false)
	case p == policiesPath:
		if s.allow(w, r, http.MethodGet) {
			s.pol.listPolicies(w, r)
		}
	case p == rollbackPath:
		s.cl.rollback(w, r)
	case p == snapshotPath:
		s.cl.getSnapshot(w, r)
	case p == acceptHistoryPath:
		s.cl.acceptHistory(w, r)
	case p == operationsList || strings.HasPrefix(p, operationsPrefix):
		s.ops.routeOperations(w, r, p)
	case p == webhook.Path:
		s.hooks.serveWebhook(w, r)
	case p == WebhookCommandsPath:
		s.hooks.enqueueCommand(w, r)
	case strings.HasPrefix(p, generationsPath):
		s.routeGeneration(w, r, p[len(generationsPath):])
	case strings.HasPrefix(p, nodesVerbPrefix):
		s.nod.routeNodesVerb(w, r, p[len(nodesVerbPrefix):])
	case strings.HasPrefix(p, clusterPrefix):
		s.cl.routeCluster(w, r, p[len(clusterPrefix):])
	case p == raftPeersPath || strings.HasPrefix(p, raftVerbPrefix):
		s.nod.routeRaft(w, r, p)
	case p == statusPath || p == generationsList || p == nodesList || strings.HasPrefix(p, nodesPrefix):
		s.routeClusterResource(w, r, p)
	case isConsolePath(p):
		s.ui.serveConsole(w, r)
	case p == "/healthz":
		if s.allow(w, r, http.MethodGet) {
			s.nod.healthz(w)
		}
	case p == "/readyz":
		if s.allow(w, r, http.MethodGet) {
			s.nod.readyz(w, r)
		}
	case p == "/metrics":
		if s.allow(w, r, http.MethodGet) {
			s.promH.ServeHTTP(w, r)
		}
	default:
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s", p))
	}
}

// routePolicy handles "{policy}", "{policy}:{verb}" and
// "{policy}:authorize/{original path}" under /v1/policies/. pinned is set
// for the /v1/generations/{n}/ form, which offers :evaluate here
// (routeGeneration sends :authorize to authorize itself).
func (s *Server) routePolicy(w http.ResponseWriter, r *http.Request, snap *Snapshot, rest string, pinned bool) {
	name, verb, tail := splitPolicyPath(rest)
	switch {
	case verb == "" && tail == "" && !pinned:
		if s.allow(w, r, http.MethodGet) {
			s.pol.getPolicy(w, r, name)
		}
	case verb == "evaluate" && tail == "":
		if s.allow(w, r, http.MethodPost) {
			s.dec.evaluate(w, r, snap, name)
		}
	case verb == "authorize" && !pinned:
		// Gateways send any method (Envoy forwards the original one).
		s.dec.authorize(w, r, name, tail, 0, false)
	case verb == "mirror" && !pinned:
		s.dec.mirrorRequest(w, r, snap, name, tail)
	case verb == "" && strings.HasPrefix(tail, "/experiments") && !pinned:
		s.pol.routeExperiments(w, r, name, tail)
	default:
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s", r.URL.Path))
	}
}

// splitPolicyPath splits "web:authorize/a/b" into ("web", "authorize",
// "/a/b"), "web:evaluate" into ("web", "evaluate", "") and "web/x" into
// ("web", "", "/x"). The verb ends at the first slash after the colon.
func splitPolicyPath(rest string) (name, verb, tail string) {
	i := strings.IndexAny(rest, ":/")
	if i < 0 {
		return rest, "", ""
	}
	name = rest[:i]
	if rest[i] == '/' {
		return name, "", rest[i:]
	}
	verb = rest[i+1:]
	if j := strings.IndexByte(verb, '/'); j >= 0 {
		verb, tail = verb[:j], verb[j:]
	}
	return name, verb, tail
}

// routeGeneration handles "{n}" (the generation resource) and
// "{n}/policies/{policy}:evaluate" or ":authorize[/{original path}]" (a
// decision pinned to generation n).
func (s *Server) routeGeneration(w http.ResponseWriter, r *http.Request, rest string) {
	num, rest, sub := strings.Cut(rest, "/")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		s.fail(w, r, errorf(errs.InvalidArgument, "generation %q is not a number", num))
		return
	}
	if !sub {
		if s.cluster == nil {
			s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (%s)", r.URL.Path, withoutClusterMsg))
		} else if s.allow(w, r, http.MethodGet) {
			s.cl.getGeneration(w, r, n)
		}
		return
	}
	if !strings.HasPrefix(rest, "policies/") {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s", r.URL.Path))
		return
	}
	if name, verb, tail := splitPolicyPath(rest[len("policies/"):]); verb == "authorize" {
		s.dec.authorize(w, r, name, tail, n, true) // answers allow or deny even for a generation not kept
		return
	}
	cur := s.gens.Current()
	if cur == nil {
		s.fail(w, r, errNoGeneration())
		return
	}
	snap := s.gens.Get(n)
	if snap == nil {
		s.fail(w, r, s.dec.errNotKept(n, cur))
		return
	}
	s.routePolicy(w, r, snap, rest[len("policies/"):], true)
}

// routeClusterResource handles the read-only cluster resources: status,
// generations and nodes.
func (s *Server) routeClusterResource(w http.ResponseWriter, r *http.Request, p string) {
	if s.cluster == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (%s)", p, withoutClusterMsg))
		return
	}
	if !s.allow(w, r, http.MethodGet) {
		return
	}
	switch {
	case p == statusPath:
		s.cl.status(w, r)
	case p == generationsList:
		s.cl.listGenerations(w, r)
	case p == nodesList:
		s.nod.listNodes(w, r)
	default:
		s.nod.getNode(w, r, p[len(nodesPrefix):])
	}
}

// validPolicyName reports whether name can be a policy: [a-z][a-z0-9-]{0,62}.
func validPolicyName(name string) bool {
	if name == "" || len(name) > 63 || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
