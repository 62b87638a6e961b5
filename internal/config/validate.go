package config

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/policyrollout/reconciler/internal/policy"
)

// Limits on values, so that a typo cannot make a node unusable.
const (
	maxBodyBytesLimit = 64 << 20
	maxExperiments    = 1000
	// maxExperimentsTotal bounds [preview] max_experiments: every
	// experiment (up to api.max_body_bytes of policy) is on every node.
	maxExperimentsTotal = 10000
	maxGitTimeout       = 10 * time.Minute
	// A validation (or repack) child's memory: 64 MiB compiles about 1,500 rules of
	// twelve terms (sandbox tests), below that a value is more likely a
	// missing digit than a choice; above 64 GiB it protects nothing.
	minValidationMemory  = 64 << 20
	maxValidationMemory  = 64 << 30
	minValidationTimeout = time.Second
	maxValidationTimeout = 10 * time.Minute
)

// Validate checks every value and returns one error listing all problems,
// each prefixed by its key (e.g. "node.http_addr: ..."). Callers that change
// a loaded Config (command-line overrides) call it again.
func (c *Config) Validate() error {
	var e errs
	c.Node.validate(&e)
	c.Git.validate(&e)
	c.GitHub.validate(&e)
	c.Preview.validate(&e)
	c.Policy.validate(&e)
	c.Validation.validate(&e)
	c.API.validate(&e)
	c.TLS.validate(&e)
	c.Log.validate(&e)
	validateGroups(&e, c.Groups)
	return e.err()
}

// validateGroups checks [groups.<name>]: names as node.group's, no
// subgroup twice.
func validateGroups(e *errs, groups map[string]GroupDecl) {
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		key := "groups." + name
		checkName(e, key, name)
		seen := map[string]bool{DefaultSubgroup: true}
		for _, sub := range groups[name].Subgroups {
			checkName(e, key+".subgroups", sub)
			if seen[sub] {
				e.add(key+".subgroups", "%q is listed twice (or is \"default\", which every group has)", sub)
			}
			seen[sub] = true
		}
	}
}

func (n *Node) validate(e *errs) {
	if !isName(n.ID) {
		e.add("node.id", "%q must be 1-63 letters, digits, '.', '_' or '-'", n.ID)
	}
	if n.DataDir == "" {
		e.add("node.data_dir", "must not be empty")
	}
	checkHostPort(e, "node.http_addr", n.HTTPAddr)
	checkHostPort(e, "node.raft_addr", n.RaftAddr)
	checkAdvertise(e, "node.http_advertise_addr", n.HTTPAdvertiseAddr, "node.http_addr", n.HTTPAddr)
	checkAdvertise(e, "node.raft_advertise_addr", n.RaftAdvertiseAddr, "node.raft_addr", n.RaftAddr)
	for i, j := range n.Join {
		checkHostPort(e, fmt.Sprintf("node.join[%d]", i), j)
	}
	if n.Bootstrap && len(n.Join) > 0 {
		e.add("node.bootstrap", "a node cannot both bootstrap a cluster and join one")
	}
	checkName(e, "node.group", n.Group)
	checkName(e, "node.subgroup", n.Subgroup)
	// Below two heartbeats (1 s) one late packet marks a node failed; past
	// a few minutes a dead node holds promotions that long.
	if d := n.HeartbeatTimeout.Duration; d != 0 && (d < time.Second || d > 5*time.Minute) {
		e.add("node.heartbeat_timeout", "%s must be between 1s and 5m (0: 1.5s)", d)
	}
	if d := n.StagingTimeout.Duration; d != 0 && (d < time.Second || d > time.Hour) {
		e.add("node.staging_timeout", "%s must be between 1s and 1h (0: 60s)", d)
	}
	if d := n.FollowTimeout.Duration; d != 0 && (d < time.Second || d > time.Hour) {
		e.add("node.follow_timeout", "%s must be between 1s and 1h (0: 15s, at most staging_timeout)", d)
	}
}

func (g *Git) validate(e *errs) {
	if g.URL == "" {
		e.add("git.url", "must not be empty")
	} else if !IsLocalPath(g.URL) && !strings.Contains(g.URL, "://") && !strings.Contains(g.URL, "@") {
		e.add("git.url", "%q is neither a path nor a URL", g.URL)
	} else if strings.Contains(g.URL, "://") {
		checkGitURL(e, g.URL)
	}
	if g.Branch == "" || strings.ContainsAny(g.Branch, " ~^:?*[\\") || strings.HasPrefix(g.Branch, "-") {
		e.add("git.branch", "%q is not a valid branch name", g.Branch)
	}
	if g.Path == "" || strings.HasPrefix(g.Path, "/") || hasDotDot(g.Path) {
		e.add("git.path", "%q must be a relative path inside the repository", g.Path)
	}
	if strings.TrimSpace(g.Poll) == "" {
		e.add("git.poll", "must be a cron spec such as \"@every 10s\"")
	} else if _, err := cron.ParseStandard(g.Poll); err != nil {
		e.add("git.poll", "%q is not a cron spec (%v); try \"@every 10s\"", g.Poll, err)
	}
	checkEnvName(e, "git.token_env", g.TokenEnv)
	switch g.Verify {
	case "none":
	case "signed":
		if g.OpenPGPKeyringFile == "" && g.SSHAllowedSignersFile == "" {
			e.add("git.verify", "\"signed\" needs trusted keys: openpgp_keyring_file or ssh_allowed_signers_file")
		}
	default:
		e.add("git.verify", "%q must be \"none\" or \"signed\"", g.Verify)
	}
	if g.Timeout.Duration <= 0 || g.Timeout.Duration > maxGitTimeout {
		e.add("git.timeout", "%s must be above 0 and at most %s", g.Timeout.Duration, maxGitTimeout)
	}
	if m := g.RepackMemoryLimitBytes; m < minValidationMemory || m > maxValidationMemory {
		e.add("git.repack_memory_limit_bytes", "%d must be between %d (64 MiB) and %d (64 GiB)", m,
			minValidationMemory, int64(maxValidationMemory))
	}
}

func checkGitURL(e *errs, raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		e.add("git.url", "%v", scrubURLError(err))
		return
	}
	switch u.Scheme {
	case "file", "http", "https", "ssh", "git":
	default:
		e.add("git.url", "scheme %q is not one of file, http, https, ssh, git", u.Scheme)
	}
	if u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword {
			e.add("git.url", "must not hold a password; name a token variable instead")
		}
	}
}

// scrubURLError drops the URL from a url.Error, since it may hold credentials.
func scrubURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

func (g *GitHub) validate(e *errs) {
	if g.Repository != "" && !isRepo(g.Repository) {
		e.add("github.repository", "%q must be \"owner/name\"", g.Repository)
	}
	u, err := url.Parse(g.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		e.add("github.api_url", "%q must be an http(s) URL", g.APIURL)
	}
	checkEnvName(e, "github.token_env", g.TokenEnv)
	checkEnvName(e, "github.webhook_secret_env", g.WebhookSecretEnv)
}

func (p *Preview) validate(e *errs) {
	if p.MaxExperimentsPerPolicy < 1 || p.MaxExperimentsPerPolicy > maxExperiments {
		e.add("preview.max_experiments_per_policy", "%d must be between 1 and %d", p.MaxExperimentsPerPolicy, maxExperiments)
	}
	if p.MaxExperiments < 1 || p.MaxExperiments > maxExperimentsTotal {
		e.add("preview.max_experiments", "%d must be between 1 and %d", p.MaxExperiments, maxExperimentsTotal)
	}
	if strings.TrimSpace(p.Summary) == "" {
		e.add("preview.summary", "must be a cron spec such as \"@every 1m\"")
	}
	for _, r := range p.Redact {
		if strings.TrimSpace(r) == "" || strings.HasPrefix(r, ".") || strings.HasSuffix(r, ".") {
			e.add("preview.redact", "%q must be a dotted request path such as \"headers.authorization\"", r)
		}
	}
	for _, s := range p.Show {
		field, name, ok := strings.Cut(s, ".")
		if !ok || name == "" || (field != "headers" && field != "query" && field != "attributes") {
			e.add("preview.show", "%q must be headers.<name>, query.<name> or attributes.<name>", s)
		}
	}
	if p.AutoStopAfter.Duration < 0 {
		e.add("preview.auto_stop_after", "%s must not be negative (0 never stops)", p.AutoStopAfter.Duration)
	}
	if p.Workers < 0 || p.Workers > 1024 {
		e.add("preview.workers", "%d must be between 0 (automatic) and 1024", p.Workers)
	}
	if p.QueueSize < 1 || p.QueueSize > 1<<24 {
		e.add("preview.queue_size", "%d must be between 1 and %d", p.QueueSize, 1<<24)
	}
	if p.LogUnchangedEvery < 0 {
		e.add("preview.log_unchanged_every", "%d must be 0 (none) or more", p.LogUnchangedEvery)
	}
	if p.LogMaxBytes < 4096 {
		e.add("preview.log_max_bytes", "%d must be at least 4096", p.LogMaxBytes)
	}
	if p.MaxCompiledBytes < 1<<20 {
		e.add("preview.max_compiled_bytes", "%d must be at least 1048576 (1 MiB)", p.MaxCompiledBytes)
	}
	if p.RecordRequests < 0 || p.RecordRequests > 1_000_000 {
		e.add("preview.record_requests", "%d must be between 0 (off) and 1000000", p.RecordRequests)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Thresholds)) {
		key := "preview.thresholds." + name
		if name != "*" && !isPolicyName(name) {
			e.add(key, "%q must be \"*\" or a policy name ([a-z][a-z0-9-]{0,62})", name)
		}
		t := p.Thresholds[name]
		for _, r := range []struct {
			k string
			v *float64
		}{{"max_allow_to_deny_ratio", t.MaxAllowToDenyRatio}, {"max_deny_to_allow_ratio", t.MaxDenyToAllowRatio}} {
			if r.v != nil && !(*r.v >= 0 && *r.v <= 1) {
				e.add(key+"."+r.k, "%v must be between 0 (off) and 1", *r.v)
			}
		}
	}
}

func (p *Policy) validate(e *errs) {
	switch p.MergeDefault {
	case policy.StrategyFail, policy.StrategyOverride, policy.StrategyMaintain:
	default:
		e.add("policy.merge_default", "%q must be \"fail\", \"override\" or \"maintain\"", p.MergeDefault)
	}
}

func (v *Validation) validate(e *errs) {
	if m := v.MemoryLimitBytes; m < minValidationMemory || m > maxValidationMemory {
		e.add("validation.memory_limit_bytes", "%d must be between %d (64 MiB) and %d (64 GiB)", m,
			minValidationMemory, int64(maxValidationMemory))
	}
	if d := v.Timeout.Duration; d < minValidationTimeout || d > maxValidationTimeout {
		e.add("validation.timeout", "%s must be between %s and %s", d, minValidationTimeout, maxValidationTimeout)
	}
}

func (a *API) validate(e *errs) {
	checkEnvName(e, "api.token_env", a.TokenEnv)
	for i, s := range a.TrustedProxies {
		if _, err := parsePrefix(s); err != nil {
			e.add(fmt.Sprintf("api.trusted_proxies[%d]", i), "%v", err)
		}
	}
	if a.MaxBodyBytes < 1 || a.MaxBodyBytes > maxBodyBytesLimit {
		e.add("api.max_body_bytes", "%d must be between 1 and %d", a.MaxBodyBytes, maxBodyBytesLimit)
	}
	a.validateDecisionLimits(e)
	a.validateFailureModes(e)
	a.validatePathSlashes(e)
	a.validateTrust(e)
}

// Ranges of the decision limits: above them a limit no longer bounds
// memory in any useful way.
const (
	maxRequestHeadersLimit    = 10_000
	maxDecisionsInFlightLimit = 100_000
)

func (a *API) validateDecisionLimits(e *errs) {
	if a.MaxRequestHeaders < 1 || a.MaxRequestHeaders > maxRequestHeadersLimit {
		e.add("api.max_request_headers", "%d must be between 1 and %d", a.MaxRequestHeaders, maxRequestHeadersLimit)
	}
	if a.MaxDecisionsInFlight < 1 || a.MaxDecisionsInFlight > maxDecisionsInFlightLimit {
		e.add("api.max_decisions_in_flight", "%d must be between 1 and %d", a.MaxDecisionsInFlight, maxDecisionsInFlightLimit)
	}
	if a.MaxDecisionBodiesPerSource < 1 || a.MaxDecisionBodiesPerSource > maxDecisionsInFlightLimit {
		e.add("api.max_decision_bodies_per_source", "%d must be between 1 and %d", a.MaxDecisionBodiesPerSource, maxDecisionsInFlightLimit)
	}
}

func (l *Log) validate(e *errs) {
	switch strings.ToLower(l.Level) {
	case "trace", "debug", "info", "warn", "error", "off":
	default:
		e.add("log.level", "%q must be trace, debug, info, warn, error or off", l.Level)
	}
	if l.Format != "text" && l.Format != "json" {
		e.add("log.format", "%q must be \"text\" or \"json\"", l.Format)
	}
}

// parsePrefix accepts a CIDR or a single address (taken as /32 or /128).
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR or an IP address", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func checkHostPort(e *errs, key, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		e.add(key, "%q must be host:port", addr)
		return
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		e.add(key, "%q has an invalid port", addr)
	}
	if strings.ContainsAny(host, " /") {
		e.add(key, "%q has an invalid host", addr)
	}
}

// checkAdvertise checks an optional advertised address, which becomes
// required when the bind address is a wildcard nobody can dial.
func checkAdvertise(e *errs, key, adv, bindKey, bind string) {
	if adv != "" {
		checkHostPort(e, key, adv)
		if host, port, err := net.SplitHostPort(adv); err == nil && (isWildcard(host) || port == "0") {
			e.add(key, "%q must be an address other nodes can dial", adv)
		}
		return
	}
	if host, _, err := net.SplitHostPort(bind); err == nil && isWildcard(host) {
		e.add(key, "is required when %s (%q) binds every interface", bindKey, bind)
	}
}

func isWildcard(host string) bool {
	if host == "" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsUnspecified()
}

func checkEnvName(e *errs, key, name string) {
	if name != "" && !isEnvName(name) {
		e.add(key, "%q is not an environment variable name", name)
	}
}

func checkName(e *errs, key, name string) {
	if !isName(name) {
		e.add(key, "%q must be 1-63 letters, digits, '.', '_' or '-'", name)
	}
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// isName reports whether s is 1-63 ASCII letters, digits, '.', '_' or '-',
// starting with a letter or digit: safe in paths, metrics and raft ids.
// isPolicyName reports whether s is a policy directory name.
func isPolicyName(s string) bool {
	if s == "" || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func isName(s string) bool {
	if s == "" || len(s) > 63 || !isAlnum(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isEnvName reports whether s is a portable environment variable name.
func isEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// isRepo reports whether s is "owner/name".
func isRepo(s string) bool {
	owner, name, ok := strings.Cut(s, "/")
	return ok && isRepoPart(owner) && isRepoPart(name)
}

func isRepoPart(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
