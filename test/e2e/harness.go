package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// Environment variables of the package.
const (
	EnvBench = "RECONCILER_E2E_BENCH"
	EnvLogs  = "RECONCILER_E2E_LOGS"
	// tokenEnv is the variable the nodes' [git] token_env names.
	tokenEnv = "E2E_GIT_TOKEN"
)

// node is one `reconciler serve` process.
type node = harness.Node

// childEnv is the environment of every process the tests start: no git
// configuration of the developer's, and the git token.
func childEnv(token string) []string { return harness.ChildEnv(tokenEnv + "=" + token) }

// clusterOptions shape a cluster's config.
type clusterOptions struct {
	URL, Token string
	Poll       string // git.poll
	Timeout    string // git.timeout
	APIToken   string // set: [api] token_env names E2E_API_TOKEN
	// Extra is TOML appended to every node's config; Env are further
	// variables of every node (the tokens Extra names).
	Extra string
	Env   []string
}

// cluster is three nodes following one repository.
type cluster struct {
	t     testing.TB
	opts  clusterOptions
	nodes []*node
}

// startCluster starts n1 (bootstrap), then n2 and n3 joining it, and waits
// until all three serve a first generation.
func startCluster(t testing.TB, opts clusterOptions) *cluster {
	t.Helper()
	hc := harness.StartCluster(t, harness.ClusterOptions{
		Size: 3,
		Env:  append([]string{tokenEnv + "=" + opts.Token, "E2E_API_TOKEN=" + opts.APIToken}, opts.Env...),
		Configure: func(cfg *harness.Config) {
			cfg.GitURL, cfg.Poll, cfg.Timeout, cfg.TokenEnv = opts.URL, opts.Poll, opts.Timeout, tokenEnv
			if opts.APIToken != "" {
				cfg.APITokenEnv = "E2E_API_TOKEN"
			}
			cfg.Extra = opts.Extra
		},
		APIToken:   opts.APIToken,
		TailLines:  60,
		AlwaysLogs: os.Getenv(EnvLogs) != "",
	})
	return &cluster{t: t, opts: opts, nodes: hc.Nodes}
}

// leader is the node all nodes agree leads.
func (c *cluster) leader() *node {
	c.t.Helper()
	var leader *node
	err := harness.Eventually(30*time.Second, func() error {
		var id string
		for _, n := range c.nodes {
			s, err := status(n)
			if err != nil {
				return err
			}
			if s.Leader == "" || (id != "" && s.Leader != id) {
				return fmt.Errorf("%s says the leader is %q", n.ID, s.Leader)
			}
			id = s.Leader
		}
		for _, n := range c.nodes {
			if n.ID == id {
				leader = n
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return leader
}

// waitServing waits until every node answers the probe with rule want and
// returns the generation they serve it from.
func (c *cluster) waitServing(want string, timeout time.Duration) uint64 {
	c.t.Helper()
	var gen uint64
	err := harness.Eventually(timeout, func() error {
		var err error
		gen, err = c.serving(want)
		return err
	})
	if err != nil {
		c.t.Fatalf("%s not served everywhere after %v: %v", want, timeout, err)
	}
	return gen
}

// serving checks once that every node answers the probe with rule want
// from one generation.
func (c *cluster) serving(want string) (uint64, error) {
	var gen uint64
	for _, n := range c.nodes {
		d, err := probe(n)
		switch {
		case err != nil:
			return 0, err
		case d.Rule != want:
			return 0, fmt.Errorf("%s answers %q from generation %d", n.ID, d.Rule, d.Generation)
		case gen != 0 && d.Generation != gen:
			return 0, fmt.Errorf("%s serves %s from generation %d, another node from %d", n.ID, want, d.Generation, gen)
		}
		gen = d.Generation
	}
	return gen, nil
}

// trigger asks any node to reconcile now (followers forward).
func (c *cluster) trigger(n *node) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, n.Base()+"/v1/cluster:reconcile", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if c.opts.APIToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.APIToken)
	}
	resp, err := client.HTTP.Do(req)
	if err != nil {
		c.t.Fatalf("reconcile via %s: %v", n.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		body, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("reconcile via %s: %d %s", n.ID, resp.StatusCode, body)
	}
}

var client = harness.NewClient(10*time.Second, 0)

func get(url string) (int, []byte, error) { return client.Get(url) }

func getJSON(url string, v any) error { return client.GetJSON(url, v) }

// statusAnswer is the part of GET /v1/status the tests read.
type statusAnswer struct {
	NodeID           string `json:"nodeId"`
	Leader           string `json:"leader"`
	ActiveGeneration uint64 `json:"activeGeneration"`
	Source           struct {
		Commit, Error string
	} `json:"source"`
	Policies []struct {
		Name       string `json:"name"`
		Conditions []struct {
			Type, Message string
			Generation    uint64
		} `json:"conditions"`
	} `json:"policies"`
	Experiments []map[string]any `json:"experiments"`
}

func status(n *node) (*statusAnswer, error) {
	var s statusAnswer
	return &s, getJSON(n.Base()+"/v1/status", &s)
}

// pullError returns the PullError message n shows on the policy web.
func (s *statusAnswer) pullError() string {
	for _, p := range s.Policies {
		for _, c := range p.Conditions {
			if p.Name == "policies/web" && c.Type == "PullError" {
				return c.Message
			}
		}
	}
	return ""
}

// generationAnswer is a generation resource.
type generationAnswer struct {
	Generation   uint64   `json:"generation"`
	Commit       string   `json:"commit"`
	State        string   `json:"state"`
	ActivateTime string   `json:"activateTime"`
	ReadyNodes   []string `json:"readyNodes"`
	Errors       []string `json:"errors"`
}

func generations(n *node) (map[string][]generationAnswer, error) {
	var list struct{ Generations []generationAnswer }
	if err := getJSON(n.Base()+"/v1/generations", &list); err != nil {
		return nil, err
	}
	byCommit := map[string][]generationAnswer{}
	for _, g := range list.Generations {
		byCommit[g.Commit] = append(byCommit[g.Commit], g)
	}
	return byCommit, nil
}

// decision is an :evaluate answer.
type decision struct {
	Decision   string `json:"decision"`
	Rule       string `json:"rule"`
	Generation uint64 `json:"generation"`
}

// probe asks n for the decision of the probe request.
func probe(n *node) (decision, error) {
	var d decision
	resp, err := client.HTTP.Post(n.Base()+"/v1/policies/web:evaluate", "application/json",
		strings.NewReader(`{"method":"GET","path":"/probe"}`))
	if err != nil {
		return d, fmt.Errorf("%s: %w", n.ID, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return d, fmt.Errorf("%s: %d %s", n.ID, resp.StatusCode, body)
	}
	return d, json.Unmarshal(body, &d)
}

// metric reads one unlabelled series from n's /metrics.
func metric(n *node, name string) (float64, error) {
	_, body, err := get(n.Base() + "/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return f, err
		}
	}
	return 0, fmt.Errorf("%s: no series %s", n.ID, name)
}
