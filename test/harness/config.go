package harness

import (
	"fmt"
	"strings"
)

// Config is a node's config.toml.
type Config struct {
	ID, DataDir, HTTPAddr, RaftAddr string
	Bootstrap                       bool
	Join                            []string // addresses of members to join (HTTP, or raft with JoinRaft)

	GitURL   string
	Poll     string // git.poll
	Timeout  string // git.timeout; omitted if empty
	TokenEnv string // git.token_env; omitted if empty

	APITokenEnv string // api.token_env
	// APIExtra is TOML appended verbatim to the [api] section, e.g.
	// trusted_proxies.
	APIExtra string

	Group, Subgroup string // node.group, node.subgroup; omitted if empty
	// NodeExtra is TOML appended verbatim to the [node] section, e.g.
	// staging_timeout.
	NodeExtra string

	// Extra is TOML appended verbatim, e.g. a [preview] section.
	Extra string
}

// TOML renders the config, logging at info level in JSON.
func (c Config) TOML() string {
	var b strings.Builder
	fmt.Fprintf(&b, `[node]
id = %q
data_dir = %q
http_addr = %q
raft_addr = %q
bootstrap = %t
join = [%s]
%s%s
[git]
url = %q
init_from = ""
poll = %q
`, c.ID, c.DataDir, c.HTTPAddr, c.RaftAddr, c.Bootstrap, quoteList(c.Join), c.groups(), c.NodeExtra, c.GitURL, c.Poll)
	if c.Timeout != "" {
		fmt.Fprintf(&b, "timeout = %q\n", c.Timeout)
	}
	if c.TokenEnv != "" {
		fmt.Fprintf(&b, "token_env = %q\n", c.TokenEnv)
	}
	fmt.Fprintf(&b, `
[api]
token_env = %q
%s
[log]
level = "info"
format = "json"
`, c.APITokenEnv, c.APIExtra)
	if c.Extra != "" {
		b.WriteString("\n" + c.Extra + "\n")
	}
	return b.String()
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
