package githubemu

import (
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
)

// shapesFS holds GitHub's own response and webhook examples (provenance in
// shapes/README.md). Every answer starts as a copy of one of them, so it
// carries every field GitHub sends, and the emulator overwrites the fields
// its state decides.
//
//go:embed shapes/rest/*.json shapes/webhooks/*.json
var shapesFS embed.FS

// WebhookExamples names the webhook payload examples WebhookExample serves.
var WebhookExamples = []string{
	"issue_comment.created",
	"issue_comment.created.on-pull-request",
	"pull_request.closed",
	"pull_request.closed.merged",
	"pull_request.opened",
	"pull_request.synchronize",
	"push",
}

// WebhookExample returns one of GitHub's webhook payload examples verbatim
// (names in WebhookExamples).
func WebhookExample(name string) ([]byte, error) {
	return shapesFS.ReadFile("shapes/webhooks/" + name + ".json")
}

// obj is a decoded JSON object.
type obj = map[string]any

// endpoint is what the renderer needs of the server: where it answers.
type endpoint interface {
	URL() string
	APIURL() string
}

// renderer turns the emulator's state into GitHub's JSON: each answer is a
// copy of one of GitHub's examples with the fields the state decides
// overwritten and its URLs pointed at this server.
type renderer struct {
	endpoint
	shapeMu sync.Mutex
	shapes  map[string]obj // decoded, rewritten templates by kind/name@repo
}

// newRenderer makes a renderer for the server at e.
func newRenderer(e endpoint) *renderer {
	return &renderer{endpoint: e, shapes: map[string]obj{}}
}

// shape returns a fresh copy of the named example, its URLs rewritten to
// point at this server and repository rp.
func (s *renderer) shape(kind, name string, rp *repo) obj {
	key := kind + "/" + name + "@" + rp.full()
	s.shapeMu.Lock()
	defer s.shapeMu.Unlock()
	o, ok := s.shapes[key]
	if !ok {
		b, err := shapesFS.ReadFile("shapes/" + kind + "/" + name + ".json")
		if err != nil {
			panic(fmt.Sprintf("githubemu: missing shape %s", key)) // a bug in the emulator
		}
		if err := json.Unmarshal([]byte(s.rewrite(string(b), rp)), &o); err != nil {
			panic(fmt.Sprintf("githubemu: bad shape %s: %v", key, err))
		}
		s.shapes[key] = o
	}
	return deepCopy(o).(obj)
}

// deepCopy copies decoded JSON, so a template is never changed.
func deepCopy(v any) any {
	switch t := v.(type) {
	case obj:
		c := make(obj, len(t))
		for k, e := range t {
			c[k] = deepCopy(e)
		}
		return c
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = deepCopy(e)
		}
		return c
	}
	return v
}

// rewrite points the examples' URLs (octocat/Hello-World on github.com in
// the REST examples, Codertocat/Hello-World in the webhooks) at this server
// and repository.
func (s *renderer) rewrite(text string, rp *repo) string {
	api := strings.TrimSuffix(s.APIURL(), "/")
	full := rp.full()
	r := strings.NewReplacer(
		"https://api.github.com/repos/octocat/Hello-World", api+"/repos/"+full,
		"https://api.github.com/repos/Codertocat/Hello-World", api+"/repos/"+full,
		"https://github.com/octocat/Hello-World", s.URL()+"/"+full,
		"https://github.com/Codertocat/Hello-World", s.URL()+"/"+full,
		"octocat/Hello-World", full,
		"Codertocat/Hello-World", full,
		"https://api.github.com", api,
		"https://github.com", s.URL(),
	)
	return r.Replace(text)
}

// setUser makes the user object u describe login: its login, ids and the
// URLs that name it.
func (s *renderer) setUser(u obj, login string) {
	if u == nil {
		return
	}
	old, _ := u["login"].(string)
	for k, v := range u {
		if str, ok := v.(string); ok && old != "" && strings.HasSuffix(k, "url") {
			u[k] = strings.ReplaceAll(str, "/"+old, "/"+login)
		}
	}
	id := userID(login)
	u["login"], u["id"] = login, id
	u["node_id"] = base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("04:User%d", id)))
	u["type"] = "User"
	if strings.HasSuffix(login, "[bot]") {
		u["type"] = "Bot"
	}
	u["site_admin"] = false
}

// user returns a user object for login, built from the issue-comment
// example's author.
func (s *renderer) user(login string, rp *repo) obj {
	u, _ := s.shape("rest", "issue-comment", rp)["user"].(obj)
	s.setUser(u, login)
	return u
}

// setRepo makes the repository object o describe rp.
func (s *renderer) setRepo(o obj, rp *repo) {
	if o == nil {
		return
	}
	o["id"], o["name"], o["full_name"] = rp.id, rp.name, rp.full()
	o["node_id"] = nodeID("010:Repository", rp.id)
	if _, ok := o["default_branch"]; ok {
		o["default_branch"] = rp.defaultBranch
	}
	owner, _ := o["owner"].(obj)
	s.setUser(owner, rp.owner)
}

// userID is a stable id for a login.
func userID(login string) int64 {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(login)))
	return int64(h.Sum32()%9_000_000) + 1_000_000
}

// nodeID imitates GitHub's legacy global ids.
func nodeID(kind string, id int64) string {
	return base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%s%d", kind, id)))
}

// child returns o[key] as an object (nil when it is not one).
func child(o obj, key string) obj {
	c, _ := o[key].(obj)
	return c
}
