// Package config is the schema of config.toml (CONTRACT.md §3): its keys,
// their defaults, and the checks a file must pass before a node starts.
//
// A missing section or key takes its default (see Default). An unknown key is
// an error that names the key. Relative paths in the file (node.data_dir,
// git.url when it is a local path, git.init_from) are resolved against the
// directory holding the file, so a node behaves the same whatever its working
// directory. Secrets never appear in the file: it names environment variables,
// and Secret reads only those.
package config

import (
	"net/netip"
	"os"
	"time"

	"github.com/policyrollout/reconciler/internal/policy"
)

// Config is a whole config.toml.
type Config struct {
	Node    Node    `toml:"node"`
	Git     Git     `toml:"git"`
	GitHub  GitHub  `toml:"github"`
	Preview Preview `toml:"preview"`
	Policy  Policy  `toml:"policy"`
	// Validation bounds the child process the leader validates in.
	Validation Validation `toml:"validation"`
	API        API        `toml:"api"`
	TLS        TLS        `toml:"tls"`
	Log        Log        `toml:"log"`
	// Groups declares node groups and their subgroups ([groups.<name>],
	// ONAP's PDP groups as the PAP knows them): a node joining in a
	// subgroup other than "default" that its group does not declare is
	// held PASSIVE, and so is one of a group that neither this table nor a
	// policy of the active generation names. The leader's table decides at
	// join; give every node the same.
	Groups map[string]GroupDecl `toml:"groups"`

	// Path is the file the configuration was loaded from ("" for Default).
	Path string `toml:"-"`
}

// Node is the [node] section: the identity and addresses of this node.
type Node struct {
	// ID is the node's stable identity, as in a StatefulSet.
	ID string `toml:"id"`
	// DataDir holds raft state, the preview log and other local state.
	// Default: data/{id}.
	DataDir string `toml:"data_dir"`
	// HTTPAddr (host:port) serves the API and decisions.
	HTTPAddr string `toml:"http_addr"`
	// RaftAddr (host:port) is the raft transport address.
	RaftAddr string `toml:"raft_addr"`
	// HTTPAdvertiseAddr and RaftAdvertiseAddr are the addresses other nodes
	// use to reach this one; empty means the bound address. Required when
	// the bind address is a wildcard (0.0.0.0, [::]).
	HTTPAdvertiseAddr string `toml:"http_advertise_addr"`
	RaftAdvertiseAddr string `toml:"raft_advertise_addr"`
	// Voter makes this node a voting raft member; false joins it as a
	// non-voting read replica that applies the log and serves decisions.
	Voter bool `toml:"voter"`
	// Bootstrap makes this node the first voter of a new cluster.
	Bootstrap bool `toml:"bootstrap"`
	// Join lists the http_addr of any members, to join an existing cluster.
	Join []string `toml:"join"`
	// Group and Subgroup scope state changes (ONAP PDP groups).
	Group    string `toml:"group"`
	Subgroup string `toml:"subgroup"`
	// HeartbeatTimeout is how long the leader waits for a node's heartbeat
	// before it marks the node failed and stops waiting for it to promote.
	// Zero means 3 heartbeat intervals (1.5 s).
	HeartbeatTimeout Duration `toml:"heartbeat_timeout"`
	// StagingTimeout is how long the leader waits for a node's Ready before
	// it promotes without it (the node leaves rotation until it catches
	// up). Zero means 60 s.
	StagingTimeout Duration `toml:"staging_timeout"`
	// FollowTimeout is how long a node may go without applying a raft
	// entry the leader had applied (a full disk, a stalled apply, its raft
	// port unreachable) before the leader promotes without it. Zero means
	// 15 s; never longer than StagingTimeout.
	FollowTimeout Duration `toml:"follow_timeout"`
}

// GroupDecl is one [groups.<name>] table.
type GroupDecl struct {
	// Subgroups are the group's subgroups besides "default", which every
	// group has.
	Subgroups []string `toml:"subgroups"`
}

// DeclaredSubgroups maps each declared group to its subgroups, "default"
// first.
func (c *Config) DeclaredSubgroups() map[string][]string {
	out := make(map[string][]string, len(c.Groups))
	for name, g := range c.Groups {
		out[name] = append([]string{DefaultSubgroup}, g.Subgroups...)
	}
	return out
}

// DefaultSubgroup is the subgroup of every group that needs no
// declaration (node.subgroup's default).
const DefaultSubgroup = "default"

// Git is the [git] section: where the policy repository lives.
type Git struct {
	// URL is a local path, file://, https:// or ssh:// URL.
	URL    string `toml:"url"`
	Branch string `toml:"branch"`
	// Path is the policies root inside the repository.
	Path string `toml:"path"`
	// InitFrom is a directory that seeds the repository when it does not exist.
	InitFrom string `toml:"init_from"`
	// Poll is a robfig/cron spec for fetching; webhooks make it faster.
	Poll string `toml:"poll"`
	// TokenEnv names the environment variable holding the token sent as
	// the basic-auth password over http(s); "" never reads one.
	TokenEnv string `toml:"token_env"`
	// Timeout bounds every network call to the remote (fetch, push).
	Timeout Duration `toml:"timeout"`
	// Verify is "none" or "signed": only commits signed by a trusted key
	// (OpenPGPKeyringFile, SSHAllowedSignersFile) become generations.
	Verify                string `toml:"verify"`
	OpenPGPKeyringFile    string `toml:"openpgp_keyring_file"`
	SSHAllowedSignersFile string `toml:"ssh_allowed_signers_file"`
	// RepackMemoryLimitBytes is the memory the child that writes the
	// clone's housekeeping pack (`reconciler repack-worker`,
	// internal/gitsource) may use beyond what it holds after start-up.
	RepackMemoryLimitBytes int64 `toml:"repack_memory_limit_bytes"`
}

// SeedsURL reports whether git.init_from applies: it seeds git.url only
// when that is a local path (a remote is never created by the node).
func (g Git) SeedsURL() bool { return g.InitFrom != "" && IsLocalPath(g.URL) }

// GitHub is the optional [github] section; without a repository, branches are
// the experiments.
type GitHub struct {
	// Repository is "owner/name"; empty disables the GitHub integration.
	Repository string `toml:"repository"`
	APIURL     string `toml:"api_url"`
	// TokenEnv names the environment variable holding the API token.
	TokenEnv string `toml:"token_env"`
	// WebhookSecretEnv names the environment variable holding the webhook secret.
	WebhookSecretEnv string `toml:"webhook_secret_env"`
}

// Enabled reports whether the GitHub integration is configured.
func (g GitHub) Enabled() bool { return g.Repository != "" }

// DefaultMaxCompiledBytes is [preview] max_compiled_bytes by default:
// room for one experiment at a policy's largest program budget (about
// 96 MiB estimated) beside many small ones.
const DefaultMaxCompiledBytes = 128 << 20

// Preview is the [preview] section: experiments and their summaries.
type Preview struct {
	AutoStart               bool `toml:"auto_start"`
	MaxExperimentsPerPolicy int  `toml:"max_experiments_per_policy"`
	// MaxExperiments caps the experiments of the whole cluster, every
	// policy and source together (replicated state on every node).
	MaxExperiments int `toml:"max_experiments"`
	// Summary is a robfig/cron spec for posting summaries.
	Summary string `toml:"summary"`
	// Redact lists dotted request paths (case-insensitive) replaced by
	// "REDACTED" in the preview log, samples and summaries.
	Redact []string `toml:"redact"`
	// Show lists the header, query parameter and attribute values kept
	// ("headers.user-agent", "query.page", "attributes.tenant"); every
	// other value of those is hidden, its name kept. Absent: the defaults
	// of internal/preview (DefaultShow); [] shows none.
	Show []string `toml:"show"`
	// Workers evaluate experiments off the live path; 0 means
	// GOMAXPROCS/4 (at least 1).
	Workers int `toml:"workers"`
	// QueueSize bounds requests waiting for the workers; past it they are
	// dropped and counted.
	QueueSize int `toml:"queue_size"`
	// LogUnchangedEvery logs 1 in N unchanged decisions per experiment;
	// 0 logs none (every changed decision is always logged).
	LogUnchangedEvery int `toml:"log_unchanged_every"`
	// LogMaxBytes is the size at which {data_dir}/preview.log rotates.
	LogMaxBytes int64 `toml:"log_max_bytes"`
	// RecordRequests is how many recent requests each node keeps to
	// replay against an experiment when it starts; 0 disables it.
	RecordRequests int `toml:"record_requests"`
	// MaxCompiledBytes bounds the programs of all the experiments one node
	// holds compiled for shadow evaluation (estimated from their size:
	// engine.Size.Bytes); an experiment that would cross it is not
	// previewed on the node, and its stats say why.
	MaxCompiledBytes int64 `toml:"max_compiled_bytes"`
	// Thresholds mark an experiment's summary failing (and the pull
	// request's reconciler/preview status failure), by policy name; "*"
	// applies to every policy, and a policy's own table overrides it key
	// by key.
	Thresholds map[string]Thresholds `toml:"thresholds"`
	// AutoStopAfter and AutoStopRequests suspend an experiment's preview
	// by itself, after that long since it started or once that many live
	// requests of its version were evaluated; 0 means never. An
	// experiment's own autoStop replaces both.
	AutoStopAfter    Duration `toml:"auto_stop_after"`
	AutoStopRequests uint64   `toml:"auto_stop_requests"`
}

// Thresholds is one [preview.thresholds.<policy>] table: the largest
// share (0 to 1) of evaluated live-mirrored requests whose decision an
// experiment may change; absent or 0 means no limit.
type Thresholds struct {
	MaxAllowToDenyRatio *float64 `toml:"max_allow_to_deny_ratio"`
	MaxDenyToAllowRatio *float64 `toml:"max_deny_to_allow_ratio"`
}

// ThresholdsFor returns the limits of policy ("*" when it has no table of
// its own, key by key), each 0 when off.
func (p Preview) ThresholdsFor(policy string) (maxAllowToDeny, maxDenyToAllow float64) {
	pick := func(get func(Thresholds) *float64) float64 {
		if t, ok := p.Thresholds[policy]; ok && get(t) != nil {
			return *get(t)
		}
		if t, ok := p.Thresholds["*"]; ok && get(t) != nil {
			return *get(t)
		}
		return 0
	}
	return pick(func(t Thresholds) *float64 { return t.MaxAllowToDenyRatio }),
		pick(func(t Thresholds) *float64 { return t.MaxDenyToAllowRatio })
}

// Policy is the [policy] section: how policy files are composed.
type Policy struct {
	// MergeDefault is the conflict strategy when neither a file nor its
	// policy names one.
	MergeDefault policy.Strategy `toml:"merge_default"`
}

// Validation is the [validation] section: the bounds of the child process
// (`reconciler validate-worker`, internal/sandbox) in which the leader
// validates every tree and compiles every policy submitted through the
// API. A child over a bound is killed, and its tree or policy refused
// naming the budget.
type Validation struct {
	// MemoryLimitBytes is the memory a child may use beyond what it holds
	// after start-up: RLIMIT_AS on Linux, and the Go memory limit.
	MemoryLimitBytes int64 `toml:"memory_limit_bytes"`
	// Timeout is how long a child may run before it is killed.
	Timeout Duration `toml:"timeout"`
}

// API is the [api] section: the HTTP API.
type API struct {
	// TokenEnv names the environment variable holding an admin token (the
	// one the nodes of a cluster also present to each other); unset or
	// empty: none. See Tokens for the other roles.
	TokenEnv string `toml:"token_env"`
	// Tokens are the named role tokens ([[api.tokens]], apiauth.go).
	Tokens []APIToken `toml:"tokens"`
	// DecisionRole, when set, is the role decisions (:evaluate,
	// :authorize, :mirror) require; "" leaves the data plane open.
	DecisionRole string `toml:"decision_role"`
	// AllowedOrigins are the browser origins ("https://console.example")
	// whose cross-origin requests the API accepts; others are refused.
	AllowedOrigins []string `toml:"allowed_origins"`
	// TLSCertFile and TLSKeyFile make the API serve HTTPS; ClientCAFile
	// additionally requires every client to present a certificate that
	// chains to it. Reloaded when the files change.
	TLSCertFile  string `toml:"tls_cert_file"`
	TLSKeyFile   string `toml:"tls_key_file"`
	ClientCAFile string `toml:"client_ca_file"`
	// TrustedProxies are the CIDRs (or single addresses) whose
	// X-Forwarded-For, X-Real-IP and X-Forwarded-Host headers are believed.
	TrustedProxies []string `toml:"trusted_proxies"`
	// MaxBodyBytes bounds every request body.
	MaxBodyBytes int64 `toml:"max_body_bytes"`
	// FailureMode is what the gateway forms (:authorize, ext_authz)
	// answer when the node cannot decide: "deny" (403) or "allow" (200).
	FailureMode string `toml:"failure_mode"`
	// FailureModes overrides FailureMode by policy name. It lives in the
	// node's config, not in policy.toml, because the node needs it exactly
	// when it has no policy.toml to read (no generation, unknown policy).
	FailureModes map[string]string `toml:"failure_modes"`
	// PathEscapedSlashes is what the gateway forms (:authorize, :mirror,
	// ext_authz) do with a path that holds "%2F", "%5C" or a backslash:
	// "reject" (the default), "unescape" or "keep" (pathslashes.go).
	PathEscapedSlashes string `toml:"path_escaped_slashes"`
	// GRPCAddr, when set, is where Envoy's ext_authz gRPC service
	// (internal/extauthz) listens; "" (the default) serves none.
	GRPCAddr string `toml:"grpc_addr"`
	// MaxRequestHeaders bounds the headers of one decision request, in
	// every form (JSON bodies, gateway checks, ext_authz Checks).
	MaxRequestHeaders int `toml:"max_request_headers"`
	// MaxDecisionsInFlight bounds the decision requests a node works on at
	// once, all forms together; past it they are refused with 503.
	MaxDecisionsInFlight int `toml:"max_decisions_in_flight"`
	// MaxDecisionBodiesPerSource bounds the decision bodies one client
	// address (an IPv6 /64) has being read at once; past it they are
	// refused with 503. Raise it for a load balancer that sends all
	// decisions from a few addresses.
	MaxDecisionBodiesPerSource int `toml:"max_decision_bodies_per_source"`
}

// TrustedPrefixes returns TrustedProxies parsed. It assumes a validated
// Config and skips entries that do not parse.
func (a API) TrustedPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(a.TrustedProxies))
	for _, s := range a.TrustedProxies {
		if p, err := parsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// TLS is the [tls] section: mutual TLS between nodes. With it, raft and
// every node-to-node HTTP call (forwarding, heartbeats, reports, joins,
// webhook hand-off) run over TLS on the raft port, and a peer must present
// a certificate of the cluster CA naming its node id (`reconciler certs`
// makes them). The files are reloaded when they change.
type TLS struct {
	// CAFile is the cluster CA certificate (PEM).
	CAFile string `toml:"ca_file"`
	// CertFile and KeyFile are this node's certificate, which must name
	// node.id, and its key (PEM).
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// DenylistFile, optional, lists serial numbers of node certificates
	// refused although they chain to the CA (a compromised node's, until
	// the CA is rotated); reloaded when it changes.
	DenylistFile string `toml:"denylist_file"`
}

// Enabled reports whether node-to-node TLS is configured.
func (t TLS) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// Log is the [log] section: the process log (not the preview log).
type Log struct {
	// Level is trace, debug, info, warn, error or off.
	Level string `toml:"level"`
	// Format is "text" or "json".
	Format string `toml:"format"`
}

// The defaults that Default uses and docs/configuration.md lists.
const (
	DefaultNodeID       = "node-1"
	DefaultHTTPAddr     = "127.0.0.1:8181"
	DefaultRaftAddr     = "127.0.0.1:8300"
	DefaultMaxBodyBytes = 1 << 20
	DefaultGitTimeout   = 30 * time.Second
	// DefaultValidationMemoryLimit and DefaultValidationTimeout are
	// internal/sandbox's defaults (cmd/reconciler checks they agree).
	DefaultValidationMemoryLimit = 1 << 30
	DefaultValidationTimeout     = 30 * time.Second
	// DefaultRepackMemoryLimit is internal/gitsource's default
	// (cmd/reconciler checks they agree).
	DefaultRepackMemoryLimit = 512 << 20

	// DefaultMaxRequestHeaders and DefaultMaxDecisionsInFlight are
	// internal/api's defaults (engine.DefaultMaxHeaders and
	// api.DefaultMaxDecisionsInFlight; internal/node checks they agree).
	DefaultMaxRequestHeaders    = 128
	DefaultMaxDecisionsInFlight = 128
	// DefaultMaxDecisionBodiesPerSource is
	// api.DefaultMaxDecisionBodiesPerSource.
	DefaultMaxDecisionBodiesPerSource = 32
)

// Default returns the configuration used for every key a file leaves out.
// Paths in it are relative to the working directory.
func Default() *Config {
	return &Config{
		Node: Node{
			ID:       DefaultNodeID,
			DataDir:  "data/" + DefaultNodeID,
			HTTPAddr: DefaultHTTPAddr,
			RaftAddr: DefaultRaftAddr,
			Voter:    true,
			Join:     []string{},
			Group:    "default",
			Subgroup: "default",
		},
		Git: Git{
			URL:      "data/policies.git",
			Branch:   "main",
			Path:     ".",
			InitFrom: "policies.example",
			Poll:     "@every 10s",
			TokenEnv: "GIT_TOKEN",
			Timeout:  Duration{DefaultGitTimeout},
			Verify:   "none",

			RepackMemoryLimitBytes: DefaultRepackMemoryLimit,
		},
		GitHub: GitHub{
			APIURL:           "https://api.github.com/",
			TokenEnv:         "GITHUB_TOKEN",
			WebhookSecretEnv: "GITHUB_WEBHOOK_SECRET",
		},
		Preview: Preview{
			AutoStart:               true,
			MaxExperimentsPerPolicy: 10,
			MaxExperiments:          200,
			Summary:                 "@every 1m",
			Redact:                  []string{"headers.authorization", "headers.cookie"},
			QueueSize:               4096,
			LogUnchangedEvery:       100,
			LogMaxBytes:             64 << 20,
			RecordRequests:          10_000,
			MaxCompiledBytes:        DefaultMaxCompiledBytes,
		},
		Policy: Policy{MergeDefault: policy.StrategyFail},
		Validation: Validation{MemoryLimitBytes: DefaultValidationMemoryLimit,
			Timeout: Duration{DefaultValidationTimeout}},
		API: API{
			TokenEnv:       "RECONCILER_TOKEN",
			Tokens:         []APIToken{},
			AllowedOrigins: []string{},
			TrustedProxies: []string{},
			MaxBodyBytes:   DefaultMaxBodyBytes,
			FailureMode:    "deny",

			PathEscapedSlashes:         PathSlashesReject,
			MaxRequestHeaders:          DefaultMaxRequestHeaders,
			MaxDecisionsInFlight:       DefaultMaxDecisionsInFlight,
			MaxDecisionBodiesPerSource: DefaultMaxDecisionBodiesPerSource,
		},
		Log: Log{Level: "info", Format: "text"},
	}
}

// Secret returns the value of the environment variable envName, but only
// when envName is one of the variables this configuration names
// (git.token_env, api.token_env, the env of each [[api.tokens]],
// github.token_env, github.webhook_secret_env); for any
// other name it returns "". This keeps the process from reading variables
// the operator did not point it at.
func (c *Config) Secret(envName string) string {
	if envName == "" {
		return ""
	}
	switch envName {
	case c.Git.TokenEnv, c.API.TokenEnv, c.GitHub.TokenEnv, c.GitHub.WebhookSecretEnv:
		return os.Getenv(envName)
	}
	for _, t := range c.API.Tokens {
		if t.Env == envName {
			return os.Getenv(envName)
		}
	}
	return ""
}
