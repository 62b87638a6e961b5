package api

import (
	"context"
	"net/http"

	"github.com/policyrollout/reconciler/internal/auth"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
)

// identityKey carries the caller's auth.Identity in a request's context.
type identityKey struct{}

// identityOf returns the identity the guard admitted r with.
func identityOf(r *http.Request) (auth.Identity, bool) {
	id, ok := r.Context().Value(identityKey{}).(auth.Identity)
	return id, ok
}

// ServeHTTP guards every request, then routes it (routes.go): the
// browser checks (origin.go), the caller's role against the route table
// (roles.go), and an audit line for every write.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rule := routeFor(r)
	if rule.class == classDecision && s.decisionRole == auth.RoleNone {
		// The data plane stays as fast as before: no identity, no audit.
		if s.browserCheck(w, r, rule) {
			s.route(w, r)
		}
		return
	}
	var aw *auditWriter
	if isWrite(r.Method) && rule.class != classDecision {
		aw = &auditWriter{ResponseWriter: w}
		w = aw
	}
	id, ok := s.guard(w, r, rule)
	if aw != nil {
		defer s.auditLine(aw, r, id, ok)
	}
	if !ok {
		return
	}
	s.route(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
}

// guard runs the checks before routing and answers when one fails.
func (s *Server) guard(w http.ResponseWriter, r *http.Request, rule *routeRule) (auth.Identity, bool) {
	if !s.browserCheck(w, r, rule) {
		return auth.Identity{}, false
	}
	need := rule.role
	if rule.class == classDecision {
		need = s.decisionRole
	}
	id, err := s.authenticate(r, need)
	if err != nil {
		s.refuse(w, r, err)
		return id, false
	}
	return id, true
}

// authenticate returns the caller's identity when it holds role need.
// Without configured credentials every caller is auth.Anonymous.
func (s *Server) authenticate(r *http.Request, need auth.Role) (auth.Identity, error) {
	if s.authErr != nil && need != auth.RoleNone {
		return auth.Identity{}, s.authErr
	}
	if peer, ok := peerConn(r); ok {
		return s.authenticatePeer(r, peer, need) // peer.go: never Anonymous there
	}
	if s.creds.Empty() {
		return auth.Anonymous, nil
	}
	return s.byCredential(r.Header.Get("Authorization"), need)
}

// byCredential returns the identity of the credential in an
// Authorization header when it holds role need.
func (s *Server) byCredential(header string, need auth.Role) (auth.Identity, error) {
	if need == auth.RoleNone {
		// An open route ignores what it was sent: a scraper's or a
		// gateway's own Authorization is not this node's business.
		token, _ := auth.ParseBearer(header)
		if id, ok := s.creds.Lookup(token); ok {
			return id, nil
		}
		return auth.Identity{Name: "anonymous"}, nil
	}
	if header == "" {
		return auth.Identity{}, errorf(errs.Unauthenticated,
			"this request needs the %s role: send \"Authorization: Bearer <token>\" with a token of role %s",
			need, rolesFrom(need))
	}
	token, ok := auth.ParseBearer(header)
	id, known := s.creds.Lookup(token)
	if !ok || !known {
		return auth.Identity{}, errorf(errs.Unauthenticated,
			"the Authorization header holds no valid bearer token of this node; this request needs the %s role (a token of role %s)",
			need, rolesFrom(need))
	}
	if id.Role < need {
		return id, errorf(errs.PermissionDenied, "token %q has the %s role; this request needs the %s role", id.Name, id.Role, need)
	}
	return id, nil
}

// rolesFrom lists the roles that include need: "writer or admin".
func rolesFrom(need auth.Role) string {
	out := need.String()
	for r := need + 1; r <= auth.RoleAdmin; r++ {
		if r == auth.RoleAdmin {
			out += " or " + r.String()
		} else {
			out += ", " + r.String()
		}
	}
	return out
}

// refuse answers a failed check; a 401 carries the Bearer challenge.
func (s *core) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if classify(err).code == errs.Unauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="reconciler"`)
	}
	s.fail(w, r, err)
}

// admit is the handlers' own check that the guard admitted r with the
// role the route table (roles.go) gives r: a second line behind the
// guard, for a handler reached some other way, that reads the one table
// rather than a role of its own. It answers and reports false otherwise.
func (s *core) admit(w http.ResponseWriter, r *http.Request) bool {
	need := routeFor(r).role
	if _, node := nodeCaller(r); node {
		// The guard admitted a node's own call only on a path of
		// nodeCalls (peer.go); it has no role, and the cluster layer
		// checks that it is about the node itself.
		return true
	}
	id, ok := identityOf(r)
	switch {
	case !ok:
		s.refuse(w, r, errorf(errs.Unauthenticated, "this request needs the %s role", need))
		return false
	case id.Role < need:
		s.refuse(w, r, errorf(errs.PermissionDenied, "token %q has the %s role; this request needs the %s role", id.Name, id.Role, need))
		return false
	}
	return true
}

// adminPost is the prologue of the admin custom methods (rollback,
// acceptHistory): POST only, the role of the route table (admin), then the body decoded
// strictly into into. On failure it answers and reports false; raw is the
// body as read, for forwarding.
func (s *core) adminPost(w http.ResponseWriter, r *http.Request, into any) (raw []byte, ok bool) {
	if !s.allow(w, r, http.MethodPost) {
		return nil, false
	}
	if raw, ok = s.admitBody(w, r); !ok {
		return nil, false
	}
	if err := decodeStrict(raw, into); err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return raw, true
}

// admitBody is admit, then the request's body (read under the size
// limit); on failure it answers and reports false.
func (s *core) admitBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if !s.admit(w, r) {
		return nil, false
	}
	raw, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return raw, true
}

// auditWriter remembers the status of the answer for the audit line.
type auditWriter struct {
	http.ResponseWriter
	code int
}

func (a *auditWriter) WriteHeader(code int) {
	if a.code == 0 {
		a.code = code
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *auditWriter) Write(b []byte) (int, error) {
	if a.code == 0 {
		a.code = http.StatusOK
	}
	return a.ResponseWriter.Write(b)
}

// auditLine writes one line per write request to the audit log: who
// (role and token name, never the token), what, from where, and the
// answer's status. Refused attempts are written too.
func (s *Server) auditLine(aw *auditWriter, r *http.Request, id auth.Identity, admitted bool) {
	if admitted && nodeChatter[r.URL.Path] {
		return // a node's own routine calls, every second or so: not an operator's change
	}
	role, name := "none", "-"
	if id.Name != "" {
		role, name = id.Role.String(), id.Name
	}
	if _, node := nodeCaller(r); node {
		role = "node" // a node certificate alone: no role at all
	}
	args := []any{"method", r.Method, "path", r.URL.Path, "role", role, "token", name,
		"remote", r.RemoteAddr, "status", aw.code, "admitted", admitted}
	// The header is the sender's claim: only a node certificate proves
	// which node forwarded. Without one (a cluster without [tls], or a
	// client setting the header) the line says the name is unverified,
	// so nobody can write another node's name into the audit log.
	if claimed := r.Header.Get(cluster.ForwardedHeader); claimed != "" {
		if by, ok := peerConn(r); ok {
			args = append(args, "forwarded_by", by)
		} else {
			args = append(args, "forwarded_by_unverified", clipClaim(claimed))
		}
	}
	s.audit.Info("request", args...)
}

// nodeChatter are the routine calls nodes make of each other (heartbeats,
// Ready/Failed reports, health self-checks). Admitted, they would be most
// of the audit log and bury the operators' writes; refused, they are
// logged like any refusal.
var nodeChatter = map[string]bool{
	clusterPrefix + "heartbeat": true,
	clusterPrefix + "propose":   true,
	clusterPrefix + "selfCheck": true,
}

// credentialSet builds the Set of cfg's credentials and Token. A set that
// does not build is reported and replaced by a closed one.
func credentialSet(cfg Config) (*auth.Set, error) {
	creds := cfg.Credentials
	if cfg.Token != "" {
		creds = append(append([]auth.Credential(nil), creds...), auth.Credential{Name: "token", Role: auth.RoleAdmin, Secret: cfg.Token})
	}
	set, err := auth.NewSet(creds)
	if err != nil {
		return nil, errorf(errs.Internal, "credentials: %v", err)
	}
	return set, nil
}

// maxClaimBytes bounds an unverified name copied into the audit log.
const maxClaimBytes = 64

// clipClaim is an unverified header value as the audit log shows it: at
// most maxClaimBytes (hclog quotes a value with spaces or quotes, so no
// value forges a field or a line).
func clipClaim(v string) string {
	if len(v) > maxClaimBytes {
		v = v[:maxClaimBytes] + "…"
	}
	return v
}
