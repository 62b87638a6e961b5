package harness

import (
	"fmt"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
)

// The answers of the HTTP API, as far as the tests read them
// (CONTRACT.md §4). Fields a test does not need are left out, so adding a
// field to the API never breaks a test.

// RaftLeader is the raftState a node's /v1/status shows while it leads
// (raft's state name, internal/cluster Cluster.RaftState).
const RaftLeader = "Leader"

// Status is GET /v1/status.
type Status struct {
	NodeID string `json:"nodeId"`
	// Leader is the id (not the address) of the node this one believes
	// leads, "" when it knows none.
	Leader string `json:"leader"`
	// RaftState is raft's state name: Leader, Follower, Candidate or
	// Shutdown.
	RaftState        string `json:"raftState"`
	ActiveGeneration uint64 `json:"activeGeneration"`
	ServedGeneration uint64 `json:"servedGeneration"`
	Source           struct {
		Commit, Error string
	} `json:"source"`
	Policies    []PolicyStatus           `json:"policies"`
	Experiments []apiv1.StatusExperiment `json:"experiments"`
	Nodes       []NodeStatus             `json:"nodes"`
}

// PolicyStatus is one entry of Status.Policies, as the API declares it.
type PolicyStatus = apiv1.PolicyStatus

// Condition is a Kubernetes-style status condition of a policy.
type Condition = apiv1.Condition

// NodeStatus is one entry of Status.Nodes.
type NodeStatus struct {
	ID         string `json:"id"`
	HTTPAddr   string `json:"httpAddr"`
	Generation uint64 `json:"generation"`
	State      string `json:"state"`
	// Reachable: the leader heard from the node recently and waits for
	// its Ready before activating a generation.
	Reachable bool `json:"reachable"`
	// JoinTime is when the leader registered the node (raft's clock).
	JoinTime time.Time `json:"joinTime"`
}

// Etags maps policy name to etag.
func (s *Status) Etags() map[string]string {
	m := make(map[string]string, len(s.Policies))
	for _, p := range s.Policies {
		m[p.Name] = p.Etag
	}
	return m
}

// Etag returns the etag of policy name ("web" or "policies/web"), or "".
func (s *Status) Etag(name string) string {
	if p := s.Policy(name); p != nil {
		return p.Etag
	}
	return ""
}

// Policy returns the status of policy name ("web" or "policies/web"), or
// nil.
func (s *Status) Policy(name string) *PolicyStatus {
	for i, p := range s.Policies {
		if p.Name == name || p.Name == "policies/"+name {
			return &s.Policies[i]
		}
	}
	return nil
}

// Condition returns the message of policy name's condition of type typ
// and whether there is one.
func (s *Status) Condition(name, typ string) (string, bool) {
	if p := s.Policy(name); p != nil {
		for _, c := range p.Conditions {
			if c.Type == typ {
				return c.Message, true
			}
		}
	}
	return "", false
}

// Generation is GET /v1/generations/{n}.
type Generation struct {
	Generation   uint64   `json:"generation"`
	Commit       string   `json:"commit"`
	State        string   `json:"state"`
	CreateTime   string   `json:"createTime"`
	ActivateTime string   `json:"activateTime"`
	ReadyNodes   []string `json:"readyNodes"`
	Errors       []string `json:"errors"`
}

// Activated reports whether the generation was ever the active one.
func (g *Generation) Activated() bool {
	return g.State == "ACTIVE" || g.State == "RETIRED" || !g.ActivatedAt().IsZero()
}

// ActivatedAt is activateTime parsed, zero when absent.
func (g *Generation) ActivatedAt() time.Time { return parseTime(g.ActivateTime) }

// CreatedAt is createTime parsed, zero when absent.
func (g *Generation) CreatedAt() time.Time { return parseTime(g.CreateTime) }

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// Decision is the answer of :evaluate.
type Decision struct {
	Decision   string `json:"decision"`
	Rule       string `json:"rule"`
	Policy     string `json:"policy"`
	Etag       string `json:"etag"`
	Generation uint64 `json:"generation"`
}

// HTTPError is an answer with another status code than the one asked for.
type HTTPError struct {
	Code int
	Body string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Code, strings.TrimSpace(e.Body))
}

// Experiment is an AIP-236 experiment of a policy, as GET
// /v1/policies/{p}/experiments/{e} shows it with its stats and summary.
type Experiment struct {
	Name   string `json:"name"`
	Etag   string `json:"etag"`
	Source struct {
		Kind       string `json:"kind"`
		HeadCommit string `json:"headCommit"`
	} `json:"source"`
	// PreviewMetadata is the zero value for an experiment never started.
	PreviewMetadata struct {
		State     string    `json:"state"`
		LogPrefix string    `json:"logPrefix"`
		StartTime time.Time `json:"startTime"`
		StopTime  time.Time `json:"stopTime"`
	} `json:"previewMetadata"`
	Stats   *ExperimentStats `json:"stats"`
	Summary *struct {
		Failing bool   `json:"failing"`
		Reason  string `json:"reason"`
	} `json:"summary"`
}

// Counts are what a preview counted of the live traffic it mirrored
// (also `reconciler replay --format json`'s stats).
type Counts struct {
	Evaluated   uint64 `json:"evaluated"`
	Unchanged   uint64 `json:"unchanged"`
	AllowToDeny uint64 `json:"allowToDeny"`
	DenyToAllow uint64 `json:"denyToAllow"`
	RuleChanged uint64 `json:"ruleChanged"`
	Errors      uint64 `json:"errors"`
	Dropped     uint64 `json:"dropped"`
}

// ExperimentStats are an experiment's counts merged over the nodes, with
// each node's share.
type ExperimentStats struct {
	Counts
	Transitions []map[string]any `json:"transitions"`
	Nodes       []struct {
		Node      string `json:"node"`
		Evaluated uint64 `json:"evaluated"`
	} `json:"nodes"`
	// Series is the last hour of live traffic, minute by minute.
	Series *struct {
		Start       time.Time `json:"start"`
		Evaluated   []uint64  `json:"evaluated"`
		AllowToDeny []uint64  `json:"allowToDeny"`
	} `json:"series"`
}

// Operation is a long-running operation (AIP-151), e.g. an experiment's
// commit; Error is nil unless it failed.
type Operation struct {
	Name  string    `json:"name"`
	Done  bool      `json:"done"`
	Error *APIError `json:"error"`
}

// APIError is an AIP-193 error: the "error" of an error answer
// (ErrorBody) or of a failed Operation.
type APIError struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

// ErrorBody is the body of an error answer.
type ErrorBody struct {
	Error APIError `json:"error"`
}
