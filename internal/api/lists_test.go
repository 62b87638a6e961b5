package api

import (
	"testing"
)

// GET /v1/policies/{p} names the lists the policy uses, with their entry
// counts and etags; a change to a list is a new policy etag.
func TestGetPolicyNamesItsLists(t *testing.T) {
	get := func(list string) map[string]any {
		files := map[string][]byte{
			"edge/policy.toml":       []byte("default_action = \"allow\"\n[[rules]]\nname = \"tor\"\npriority = 1\naction = \"deny\"\nmatch = \"inIpList(request.source_ip, 'tor-exit')\"\n"),
			"_lists/tor-exit.netset": []byte(list),
		}
		e := treeEnv(t, files)
		a := e.do("GET", "/v1/policies/edge", nil, nil)
		if a.code != 200 {
			t.Fatalf("get = %d %s", a.code, a.body)
		}
		return a.json(t)
	}
	m1, m2 := get("10.0.0.0/8\n192.0.2.1\n"), get("10.0.0.0/8\n")
	lists, _ := m1["lists"].([]any)
	if len(lists) != 1 {
		t.Fatalf("lists = %v", m1["lists"])
	}
	l, _ := lists[0].(map[string]any)
	if l["name"] != "tor-exit" || l["file"] != "_lists/tor-exit.netset" || l["kind"] != "ip" || l["entries"] != 2.0 || len(l["etag"].(string)) != 32 {
		t.Errorf("list = %v", l)
	}
	if m1["etag"] == m2["etag"] {
		t.Error("the policy's etag did not change with its list")
	}
}
