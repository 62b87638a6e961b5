package api

import (
	"net/http"
	"strings"

	"github.com/policyrollout/reconciler/internal/auth"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// routeClass says which of the API's guards apply to a request.
type routeClass int

const (
	// classAPI is every resource and write: roles, Host, Origin and,
	// for writes, the JSON content type.
	classAPI routeClass = iota
	// classDecision is the data plane (:evaluate, :authorize, :mirror):
	// open unless [api] decision_role is set, no Host check (there Host
	// is data a gateway forwards).
	classDecision
	// classWebhook authenticates itself (the HMAC signature) and comes
	// from GitHub through whatever name the operator gave the node.
	classWebhook
	// classProbe is health, readiness and metrics: open, for load
	// balancers and scrapers.
	classProbe
)

// routeRule is one line of the route table: which requests it covers,
// their class and the role they need. Pattern is the path it covers as
// docs/architecture.md shows it, where a table names the handler of each
// route (a test keeps the two the same); Example is a path it matches,
// for the tests.
type routeRule struct {
	Method  string // "" any method; "GET" includes HEAD
	Pattern string
	Example string
	class   routeClass
	role    auth.Role
	match   func(path string) bool
}

// routeTable maps every request to the role it needs, first match wins.
// It is the one place that says which role a route needs: the handlers'
// own check (admit, auth.go) reads it too. It is fail-closed: a read
// nobody listed needs a reader, a write nobody listed needs an admin, so
// a new endpoint is never open by omission.
var routeTable = []routeRule{
	{"", "/v1/policies/{policy}:evaluate", "/v1/policies/web:evaluate", classDecision, auth.RoleNone, isDecisionPath},
	{"", "/v1/generations/{n}/policies/{policy}:evaluate", "/v1/generations/1/policies/web:evaluate", classDecision, auth.RoleNone, isDecisionPath},
	{"", "/v1/policies/{policy}:authorize/{path}", "/v1/policies/web:authorize/admin", classDecision, auth.RoleNone, isDecisionPath},
	{"", "/v1/policies/{policy}:mirror", "/v1/policies/web:mirror", classDecision, auth.RoleNone, isDecisionPath},
	{"", "/v1/policies/{policy}:mirror/{path}", "/v1/policies/web:mirror/static/app.js", classDecision, auth.RoleNone, isDecisionPath},
	{"", "/v1/generations/{n}/policies/{policy}:authorize/{path}", "/v1/generations/1/policies/web:authorize/admin", classDecision, auth.RoleNone, isDecisionPath},
	{http.MethodPost, webhook.Path, webhook.Path, classWebhook, auth.RoleNone, is(webhook.Path)},
	{http.MethodGet, "/healthz", "/healthz", classProbe, auth.RoleNone, is("/healthz")},
	{http.MethodGet, "/readyz", "/readyz", classProbe, auth.RoleNone, is("/readyz")},
	{http.MethodGet, "/metrics", "/metrics", classProbe, auth.RoleNone, is("/metrics")},
	// The console's static assets hold no data (internal/console); its
	// data calls are the reader routes below.
	{http.MethodGet, "/ui/{asset}", "/ui/", classAPI, auth.RoleNone, isConsolePath},
	{http.MethodPost, "/v1/policies/{policy}/experiments", "/v1/policies/web/experiments", classAPI, auth.RoleWriter, isExperimentPath},
	{http.MethodPatch, "/v1/policies/{policy}/experiments/{id}", "/v1/policies/web/experiments/e1", classAPI, auth.RoleWriter, isExperimentPath},
	{http.MethodDelete, "/v1/policies/{policy}/experiments/{id}", "/v1/policies/web/experiments/e1", classAPI, auth.RoleWriter, isExperimentPath},
	{http.MethodPost, "/v1/policies/{policy}/experiments/{id}:startPreview", "/v1/policies/web/experiments/e1:startPreview", classAPI, auth.RoleWriter, isExperimentPath},
	{http.MethodPost, "/v1/policies/{policy}/experiments/{id}:stopPreview", "/v1/policies/web/experiments/e1:stopPreview", classAPI, auth.RoleWriter, isExperimentPath},
	{http.MethodPost, "/v1/policies/{policy}/experiments/{id}:commit", "/v1/policies/web/experiments/e1:commit", classAPI, auth.RoleWriter, isExperimentPath},
	{http.MethodPost, "/v1/operations/{id}:cancel", "/v1/operations/0a1b:cancel", classAPI, auth.RoleWriter, isOperationVerb("cancel")},
	{http.MethodDelete, "/v1/operations/{id}", "/v1/operations/0a1b", classAPI, auth.RoleWriter, isOperationVerb("")},
	{http.MethodPost, "/v1/operations/{id}:wait", "/v1/operations/0a1b:wait", classAPI, auth.RoleReader, isOperationVerb("wait")},
	{http.MethodPost, clusterPrefix + "reconcile", clusterPrefix + "reconcile", classAPI, auth.RoleWriter, is(clusterPrefix + "reconcile")},
	{http.MethodPost, rollbackPath, rollbackPath, classAPI, auth.RoleAdmin, is(rollbackPath)},
	{http.MethodPost, acceptHistoryPath, acceptHistoryPath, classAPI, auth.RoleAdmin, is(acceptHistoryPath)},
	{http.MethodPost, clusterPrefix + "join", clusterPrefix + "join", classAPI, auth.RoleAdmin, is(clusterPrefix + "join")},
	{http.MethodPost, clusterPrefix + "leave", clusterPrefix + "leave", classAPI, auth.RoleAdmin, is(clusterPrefix + "leave")},
	{http.MethodPost, clusterPrefix + "propose", clusterPrefix + "propose", classAPI, auth.RoleAdmin, is(clusterPrefix + "propose")},
	{http.MethodPost, clusterPrefix + "heartbeat", clusterPrefix + "heartbeat", classAPI, auth.RoleAdmin, is(clusterPrefix + "heartbeat")},
	{http.MethodPost, clusterPrefix + "selfCheck", clusterPrefix + "selfCheck", classAPI, auth.RoleAdmin, is(clusterPrefix + "selfCheck")},
	{http.MethodPost, WebhookCommandsPath, WebhookCommandsPath, classAPI, auth.RoleAdmin, is(WebhookCommandsPath)},
	{http.MethodPost, "/v1/nodes:changeState", "/v1/nodes:changeState", classAPI, auth.RoleAdmin, is("/v1/nodes:changeState")},
	{http.MethodPost, "/v1/nodes:healthCheck", "/v1/nodes:healthCheck", classAPI, auth.RoleAdmin, is("/v1/nodes:healthCheck")},
	{http.MethodGet, raftPeersPath, raftPeersPath, classAPI, auth.RoleAdmin, is(raftPeersPath)},
	{http.MethodPost, raftVerbPrefix + raftTransferVerb, raftVerbPrefix + raftTransferVerb, classAPI, auth.RoleAdmin, is(raftVerbPrefix + raftTransferVerb)},
	{http.MethodPost, raftVerbPrefix + raftRemoveVerb, raftVerbPrefix + raftRemoveVerb, classAPI, auth.RoleAdmin, is(raftVerbPrefix + raftRemoveVerb)},
	{http.MethodGet, snapshotPath, snapshotPath, classAPI, auth.RoleAdmin, is(snapshotPath)},
	{http.MethodGet, statusPath, statusPath, classAPI, auth.RoleReader, is(statusPath)},
	{http.MethodGet, policiesPath, policiesPath, classAPI, auth.RoleReader, is(policiesPath)},
	{http.MethodGet, "/v1/policies/{policy}", "/v1/policies/web", classAPI, auth.RoleReader, isPolicyResource},
	{http.MethodGet, "/v1/policies/{policy}/experiments", "/v1/policies/web/experiments", classAPI, auth.RoleReader, isExperimentPath},
	{http.MethodGet, "/v1/policies/{policy}/experiments/{id}", "/v1/policies/web/experiments/e1", classAPI, auth.RoleReader, isExperimentPath},
	{http.MethodGet, operationsList, operationsList, classAPI, auth.RoleReader, is(operationsList)},
	{http.MethodGet, "/v1/operations/{id}", "/v1/operations/0a1b", classAPI, auth.RoleReader, isOperationVerb("")},
	{http.MethodGet, generationsList, generationsList, classAPI, auth.RoleReader, is(generationsList)},
	{http.MethodGet, "/v1/generations/{n}", "/v1/generations/1", classAPI, auth.RoleReader, isGenerationResource},
	{http.MethodGet, nodesList, nodesList, classAPI, auth.RoleReader, is(nodesList)},
	{http.MethodGet, "/v1/nodes/{id}", "/v1/nodes/n1", classAPI, auth.RoleReader, hasPrefix(nodesPrefix)},
	// The fail-closed defaults: whatever no line above names.
	{http.MethodGet, anyOtherPath, "/v1/unlisted", classAPI, auth.RoleReader, anyPath},
	{"", anyOtherPath, "/v1/nodes:changeState", classAPI, auth.RoleAdmin, anyPath},
}

// anyOtherPath is the pattern of the fail-closed defaults.
const anyOtherPath = "(any other path)"

// routeFor returns the rule that covers r.
func routeFor(r *http.Request) *routeRule {
	p := r.URL.Path
	for i := range routeTable {
		rule := &routeTable[i]
		if rule.covers(r.Method) && rule.match(p) {
			return rule
		}
	}
	return &routeTable[len(routeTable)-1] // unreachable: the last rule matches everything
}

func (rr *routeRule) covers(method string) bool {
	switch rr.Method {
	case "":
		return true
	case http.MethodGet:
		return method == http.MethodGet || method == http.MethodHead
	}
	return method == rr.Method
}

// write reports whether a method changes something (a browser may send
// only GET, HEAD and POST without asking the server first).
func isWrite(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

func is(path string) func(string) bool { return func(p string) bool { return p == path } }

func hasPrefix(prefix string) func(string) bool {
	return func(p string) bool { return strings.HasPrefix(p, prefix) }
}

func anyPath(string) bool { return true }

// isDecisionPath matches what routePolicy serves as a decision:
// /v1/policies/{p}:evaluate, /v1/policies/{p}:authorize[/…] and
// :mirror[/…] (the gateway forms carry the original path as a suffix),
// each also pinned under /v1/generations/{n}/.
func isDecisionPath(p string) bool {
	if rest, ok := strings.CutPrefix(p, generationsPath); ok {
		_, after, ok := strings.Cut(rest, "/policies/")
		if !ok {
			return false
		}
		p = policiesPrefix + after
	}
	rest, ok := strings.CutPrefix(p, policiesPrefix)
	if !ok {
		return false
	}
	_, verb, tail := splitPolicyPath(rest)
	return verb == "authorize" || verb == "mirror" || verb == "evaluate" && tail == ""
}

// isExperimentPath matches /v1/policies/{p}/experiments[/…].
func isExperimentPath(p string) bool {
	rest, ok := strings.CutPrefix(p, policiesPrefix)
	if !ok {
		return false
	}
	_, verb, tail := splitPolicyPath(rest)
	return verb == "" && strings.HasPrefix(tail, "/experiments")
}

// isPolicyResource matches /v1/policies/{policy}.
func isPolicyResource(p string) bool {
	rest, ok := strings.CutPrefix(p, policiesPrefix)
	return ok && !strings.ContainsAny(rest, ":/")
}

// isGenerationResource matches /v1/generations/{n}.
func isGenerationResource(p string) bool {
	rest, ok := strings.CutPrefix(p, generationsPath)
	return ok && !strings.Contains(rest, "/")
}

// isOperationVerb matches /v1/operations/{id}:{verb} ("" for the
// operation itself).
func isOperationVerb(verb string) func(string) bool {
	return func(p string) bool {
		rest, ok := strings.CutPrefix(p, operationsPrefix)
		if !ok {
			return false
		}
		_, v, _ := strings.Cut(rest, ":")
		return v == verb
	}
}
