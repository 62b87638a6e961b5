package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// The tokens of TestRolesAcrossNodes, one per role.
const (
	adminToken  = "e2e-admin-token-4b1"
	writerToken = "e2e-writer-token-9c2"
	readerToken = "e2e-reader-token-7d3"
)

// rolesTOML adds a writer and a reader token to the admin token of
// [api] token_env.
const rolesTOML = `
[[api.tokens]]
name = "ci"
role = "writer"
env = "E2E_WRITER_TOKEN"

[[api.tokens]]
name = "dashboard"
role = "reader"
env = "E2E_READER_TOKEN"
`

func clientWith(token string) *harness.Client {
	c := harness.NewClient(10*time.Second, 0)
	c.Token = token
	return c
}

// TestRolesAcrossNodes: three `reconciler serve` processes with the
// three roles' tokens. A follower judges a caller's role itself, and
// forwards an admitted write with the caller's own credential, which the
// leader judges again and writes to its audit log with the name of the
// token and the node that forwarded it.
func TestRolesAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: starts real processes; skipped by -short")
	}
	repo := harness.NewRepo(t, harness.RepoOptions{Token: gitToken})
	c := harness.StartCluster(t, harness.ClusterOptions{
		Size: 3, Repo: repo, APIToken: adminToken, Extra: rolesTOML,
		Env:       []string{"E2E_WRITER_TOKEN=" + writerToken, "E2E_READER_TOKEN=" + readerToken},
		Configure: func(cfg *harness.Config) { cfg.Poll, cfg.Timeout = "@every 1h", "5s" },
		TailLines: 60, AlwaysLogs: os.Getenv(EnvLogs) != "",
	})
	c.WaitServing(0, nil, time.Minute)
	admin, writer, reader, anonymous := clientWith(adminToken), clientWith(writerToken), clientWith(readerToken), clientWith("")
	var leader, follower *harness.Node
	if err := harness.Eventually(30*time.Second, func() error {
		for _, n := range c.Nodes {
			s, err := admin.Status(n)
			if err != nil {
				return err
			}
			if s.RaftState == harness.RaftLeader {
				leader = n
			} else {
				follower = n
			}
		}
		if leader == nil || follower == nil {
			return fmt.Errorf("no leader and follower yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	base := follower.Base()

	for _, tc := range []struct {
		what         string
		cl           *harness.Client
		method, path string
		body         string
		want         int
	}{
		{"status without a token", anonymous, http.MethodGet, "/v1/status", "", http.StatusUnauthorized},
		{"status with a reader's", reader, http.MethodGet, "/v1/status", "", http.StatusOK},
		{"reconcile with a reader's", reader, http.MethodPost, "/v1/cluster:reconcile", "{}", http.StatusForbidden},
		{"rollback with a writer's", writer, http.MethodPost, "/v1/generations:rollback", `{"waitSeconds":0}`, http.StatusForbidden},
		{"a decision without a token", anonymous, http.MethodPost, "/v1/policies/web:evaluate", `{"path":"/"}`, http.StatusOK},
		{"an experiment with a writer's", writer, http.MethodPost, "/v1/policies/web/experiments?experimentId=roles",
			`{"policy":{"default_action":"deny"}}`, http.StatusOK},
	} {
		code, body, err := tc.cl.Do(tc.method, base+tc.path, tc.body)
		if err != nil || code != tc.want {
			t.Errorf("%s via %s: %d %s %v, want %d", tc.what, follower.ID, code, body, err, tc.want)
		}
	}
	want := []string{`"@module":"reconciler.audit"`, `"path":"/v1/policies/web/experiments"`, `"token":"ci"`,
		`"role":"writer"`, `"forwarded_by_unverified":"` + follower.ID + `"`, `"status":200`}
	if err := harness.Eventually(10*time.Second, func() error {
		data, _ := os.ReadFile(leader.Log)
		for _, line := range strings.Split(string(data), "\n") {
			if containsAll(line, want) {
				return nil
			}
		}
		return fmt.Errorf("no audit line with %v in %s's log", want, leader.ID)
	}); err != nil {
		t.Error(err)
	}
	for _, n := range c.Nodes {
		data, _ := os.ReadFile(n.Log)
		for _, secret := range []string{adminToken, writerToken, readerToken} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s logged a token", n.ID)
			}
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
