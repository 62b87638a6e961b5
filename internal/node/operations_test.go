package node

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// errorAnswer is an AIP-193 error body.
type errorAnswer struct {
	Error struct {
		Code    int    `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"error"`
}

// operationList is a ListOperations answer.
type operationList struct {
	Operations    []operationAnswer `json:"operations"`
	NextPageToken string            `json:"nextPageToken"`
}

// apiExperimentBody is a one-rule API experiment of policy web.
func apiExperimentBody(rule string) string {
	return `{"policy":{"default_action":"deny","rules":[{"name":"` + rule +
		`","priority":1,"action":"allow","match":"request.path == \"/healthz\""}]}}`
}

// TestOperationsAIP151 (issue 24 finding 4): the operations collection
// is listed with a filter and pages (on a follower), :wait answers a done
// operation at once, :cancel of a done one is FAILED_PRECONDITION, not a
// 405 that reads ":cancel" as part of the id, and DELETE removes one on
// every node.
func TestOperationsAIP151(t *testing.T) {
	c := newTestCluster(t)
	c.start("n1", nil)
	c.start("n2", nil)
	all := []string{"n1", "n2"}
	c.allServe(1, all...)
	f := followerOf(c.leader(all...), all)
	base := c.base(f) + "/v1/policies/web/experiments"
	var names []string
	for _, id := range []string{"o1", "o2", "o3"} {
		var op operationAnswer
		if code := call(t, http.MethodPost, base+"?experimentId="+id, apiExperimentBody("h"), &op); code != 200 || !op.Done {
			t.Fatalf("create %s: %d %+v", id, code, op)
		}
		names = append(names, op.Name)
	}
	var del operationAnswer
	if code := call(t, http.MethodDelete, base+"/o3", "", &del); code != 200 {
		t.Fatalf("delete o3: %d", code)
	}
	ops := c.base(f) + "/v1/operations"
	seen := map[string]bool{}
	token := ""
	for pages := 0; ; pages++ {
		var page operationList
		q := url.Values{"pageSize": {"1"}, "filter": {`done = true AND metadata.verb = create`}}
		if token != "" {
			q.Set("pageToken", token)
		}
		if code := call(t, http.MethodGet, ops+"?"+q.Encode(), "", &page); code != 200 || len(page.Operations) > 1 {
			t.Fatalf("list page %d: HTTP %d %+v", pages, code, page)
		}
		for _, op := range page.Operations {
			seen[op.Name] = true
		}
		if token = page.NextPageToken; token == "" || pages > 10 {
			break
		}
	}
	for _, n := range names {
		if !seen[n] {
			t.Errorf("the list of create operations misses %s (saw %v)", n, seen)
		}
	}
	if seen[del.Name] {
		t.Errorf("the create filter listed the delete operation %s", del.Name)
	}
	var target operationList
	call(t, http.MethodGet, ops+"?filter="+url.QueryEscape(`metadata.target = "policies/web/experiments/o3"`), "", &target)
	if len(target.Operations) != 2 {
		t.Errorf("operations on o3: %+v", target.Operations)
	}
	var e errorAnswer
	if code := call(t, http.MethodGet, ops+"?filter="+url.QueryEscape("done = maybe"), "", &e); code != 400 ||
		!strings.Contains(e.Error.Message, "done") {
		t.Errorf("a bad filter: %d %+v", code, e)
	}
	if code := call(t, http.MethodGet, ops+"?pageToken=garbage", "", &e); code != 400 ||
		!strings.Contains(e.Error.Message, "pageToken") {
		t.Errorf("a forged page token: %d %+v", code, e)
	}

	var waited operationAnswer
	if code := call(t, http.MethodPost, c.base(f)+"/v1/"+names[0]+":wait", `{"timeout":"5s"}`, &waited); code != 200 ||
		!waited.Done || waited.Name != names[0] {
		t.Errorf(":wait on a done operation: %d %+v", code, waited)
	}
	if code := call(t, http.MethodPost, c.base(f)+"/v1/"+names[0]+":wait", `{"timeout":"1h"}`, &e); code != 400 ||
		!strings.Contains(e.Error.Message, "timeout") {
		t.Errorf(":wait beyond the bound: %d %+v", code, e)
	}
	if code := call(t, http.MethodPost, c.base(f)+"/v1/"+names[0]+":cancel", "{}", &e); code != 400 ||
		e.Error.Status != "FAILED_PRECONDITION" {
		t.Errorf(":cancel of a done operation: %d %+v", code, e)
	}
	if code := call(t, http.MethodPost, c.base(f)+"/v1/"+names[0]+":frobnicate", "{}", &e); code != 404 {
		t.Errorf("an unknown verb: %d %+v", code, e)
	}
	if code := call(t, http.MethodDelete, c.base(f)+"/v1/"+names[0], "", nil); code != 200 {
		t.Fatalf("DELETE operation: %d", code)
	}
	for _, id := range all {
		eventually(t, waitTimeout, "the deleted operation gone on "+id, func() error {
			if code := call(t, http.MethodGet, c.base(id)+"/v1/"+names[0], "", nil); code != 404 {
				return fmt.Errorf("HTTP %d", code)
			}
			return nil
		})
	}
}

// TestAPIExperimentRequestErrors (issue 24 finding 5 and AIP-133/proto3
// JSON): a create without experimentId gets an id from the server, a bad
// one names the parameter, a duplicate rule names both places in the
// body, and preview_metadata and parent_etag are accepted.
func TestAPIExperimentRequestErrors(t *testing.T) {
	c := newTestCluster(t)
	c.start("n1", nil)
	c.allServe(1, "n1")
	base := c.base("n1") + "/v1/policies/web/experiments"
	var op struct {
		operationAnswer
		Response struct {
			Name string `json:"name"`
			Etag string `json:"etag"`
		} `json:"response"`
	}
	if code := call(t, http.MethodPost, base, apiExperimentBody("h"), &op); code != 200 || op.Error != nil ||
		!strings.HasPrefix(op.Response.Name, "policies/web/experiments/") {
		t.Fatalf("create without experimentId: %d %+v", code, op)
	}
	t.Logf("server-generated name: %s", op.Response.Name)
	var e errorAnswer
	if code := call(t, http.MethodPost, base+"?experimentId=Bad_Id", apiExperimentBody("h"), &e); code != 400 ||
		!strings.Contains(e.Error.Message, "experimentId") {
		t.Errorf("a bad experimentId: %d %+v", code, e)
	}
	dup := `{"policy":{"default_action":"deny","rules":[` +
		`{"name":"a","priority":1,"action":"allow","match":"request.path == \"/a\""},` +
		`{"name":"b","priority":2,"action":"allow","match":"request.path == \"/b\""},` +
		`{"name":"a","priority":3,"action":"allow","match":"request.path == \"/c\""}]}}`
	if code := call(t, http.MethodPost, base+"?experimentId=dup", dup, &e); code != 400 ||
		!strings.Contains(e.Error.Message, "rules[0]") || !strings.Contains(e.Error.Message, "rules[2]") ||
		strings.Contains(e.Error.Message, ":0") {
		t.Errorf("a duplicate rule: %d %+v", code, e)
	}
	snake := `{"preview_metadata":{"state":"ACTIVE"},"create_time":"2020-01-01T00:00:00Z",` + apiExperimentBody("h")[1:]
	if code := call(t, http.MethodPost, base+"?experimentId=snake", snake, &e); code != 200 {
		t.Errorf("a create with proto3 field names: %d %+v", code, e)
	}
	var exp experimentAnswer
	call(t, http.MethodGet, base+"/snake", "", &exp)
	commit := fmt.Sprintf(`{"etag":%q,"parent_etag":"not-the-live-one"}`, exp.Etag)
	if code := call(t, http.MethodPost, base+"/snake:commit", commit, &e); code != 409 || e.Error.Status != "ABORTED" {
		t.Errorf("a commit with a stale parent_etag: %d %+v", code, e)
	}
}
