package api

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// nodeCerts issues node certificates of one CA and returns them parsed.
func nodeCerts(t *testing.T, ids ...string) map[string]*x509.Certificate {
	t.Helper()
	dir := t.TempDir()
	if err := tlsconfig.CreateCA(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	out := map[string]*x509.Certificate{}
	for _, id := range ids {
		f, err := tlsconfig.CreateNode(dir, id, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tlsconfig.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(m.Cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		out[id] = c
	}
	return out
}

// TestNodePortAuthority is the route table of the node port: a node
// certificate alone is never admin (issue 22, finding 2): it reaches only
// the node's own calls, a stranger only its join, the health check only
// from the leader (the fake's n1); a caller's token decides the rest, and
// only from a member; decisions and probes are not served there.
func TestNodePortAuthority(t *testing.T) {
	fc := &fakeCluster{state: clusterState(), view: cluster.View{Leader: "n1"},
		join: func(req cluster.JoinRequest) (raftstore.Node, error) { return raftstore.Node{ID: req.ID}, nil }}
	s := newTestEnv(t, Config{Cluster: fc, Token: "tok", PeerTLS: true}).srv
	certs := nodeCerts(t, "n1", "n2", "n9")
	bearer := "Bearer tok"
	for _, tc := range []struct {
		from, method, path, body, auth string
		want                           int
	}{
		{"n9", "POST", "/v1/cluster:leave", `{"id":"n2"}`, "", 403},
		{"n9", "POST", "/v1/cluster:heartbeat", `{"id":"n9"}`, "", 403},
		{"n9", "POST", "/v1/cluster:reconcile", `{}`, "", 403},
		{"n9", "POST", "/v1/cluster:join", `{"id":"n9","raftAddr":"127.0.0.1:1","httpAddr":"127.0.0.1:2"}`, "", 200},
		{"n9", "POST", "/v1/nodes:changeState", `{"state":"PASSIVE","name":"n2"}`, bearer, 403},
		{"n2", "POST", "/v1/nodes:changeState", `{"state":"PASSIVE","name":"n2"}`, "", 403},
		{"n2", "POST", "/v1/nodes:changeState", `{"state":"PASSIVE","name":"n2"}`, bearer, 200},
		{"n2", "POST", "/v1/nodes:changeState", `{"state":"PASSIVE","name":"n2"}`, "Bearer nope", 401},
		{"n2", "POST", rollbackPath, `{}`, "", 403},
		{"n2", "POST", "/v1/cluster:reconcile", `{}`, "", 202},
		{"n2", "POST", "/v1/cluster:selfCheck", `{}`, "", 403},
		{"n1", "POST", "/v1/cluster:selfCheck", `{}`, "", 200},
		{"n2", "GET", "/v1/status", "", "", 403},
		{"n2", "GET", "/v1/status", "", bearer, 200},
		{"n2", "POST", "/v1/policies/web:evaluate", `{"path":"/"}`, "", 404},
		{"n2", "GET", "/healthz", "", "", 404},
	} {
		req := httptest.NewRequest(tc.method, "https://127.0.0.1"+tc.path, strings.NewReader(tc.body))
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{certs[tc.from]}}
		req.Header.Set("Content-Type", "application/json")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		w := httptest.NewRecorder()
		s.PeerHandler().ServeHTTP(w, req)
		if w.Code != tc.want {
			t.Errorf("%s: %s %s (Authorization %q) = %d %s, want %d", tc.from, tc.method, tc.path, tc.auth,
				w.Code, strings.TrimSpace(w.Body.String()), tc.want)
		}
	}
}

// TestNodePortWithoutCredentials: a node whose API has no credentials
// (the loopback development mode) still gives a node certificate no
// anonymous admin on the node port.
func TestNodePortWithoutCredentials(t *testing.T) {
	fc := &fakeCluster{state: clusterState(), view: cluster.View{Leader: "n1"}}
	s := newTestEnv(t, Config{Cluster: fc, PeerTLS: true}).srv
	certs := nodeCerts(t, "n2")
	for _, auth := range []string{"", "Bearer anything"} {
		req := httptest.NewRequest(http.MethodPost, "https://127.0.0.1/v1/nodes:changeState",
			strings.NewReader(`{"state":"PASSIVE","name":"n2"}`))
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{certs["n2"]}}
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		s.PeerHandler().ServeHTTP(w, req)
		if w.Code/100 == 2 {
			t.Errorf("changeState from n2's certificate (Authorization %q) on a node without credentials = %d", auth, w.Code)
		}
	}
}

// TestForwardedMarkCountsOnlyFromANode: with [tls] nodes forward on the
// node port with their certificates, so the forwarded mark a client sets
// on the API port is not taken (a follower answered such a write
// NOT_LEADER, and the leader appended a raft barrier for it); on the node
// port, from a node's certificate, it is.
func TestForwardedMarkCountsOnlyFromANode(t *testing.T) {
	fc := &fakeCluster{state: clusterState(), view: cluster.View{Leader: "n1"},
		join: func(req cluster.JoinRequest) (raftstore.Node, error) { return raftstore.Node{ID: req.ID}, nil }}
	e := newTestEnv(t, Config{Cluster: fc, Token: "tok", PeerTLS: true})
	body := `{"id":"n9","raftAddr":"127.0.0.1:1","httpAddr":"127.0.0.1:2"}`
	a := e.do(http.MethodPost, "/v1/cluster:join", strings.NewReader(body),
		map[string]string{cluster.ForwardedHeader: "n1", "Authorization": "Bearer tok"})
	if a.code != 200 || len(fc.forwarded) != 1 || fc.forwarded[0] {
		t.Fatalf("a client's mark on the API port: %d %s, forwarded %v; want served, not marked", a.code, a.body, fc.forwarded)
	}
	req := httptest.NewRequest(http.MethodPost, "https://127.0.0.1/v1/cluster:join", strings.NewReader(body))
	req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{nodeCerts(t, "n9")["n9"]}}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(cluster.ForwardedHeader, "n2")
	w := httptest.NewRecorder()
	e.srv.PeerHandler().ServeHTTP(w, req)
	if w.Code != 200 || len(fc.forwarded) != 2 || !fc.forwarded[1] {
		t.Fatalf("a node's mark on the node port: %d %s, forwarded %v; want it marked", w.Code, w.Body, fc.forwarded)
	}
}
