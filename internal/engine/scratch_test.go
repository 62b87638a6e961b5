package engine

import (
	"testing"
)

func TestScratchCosts(t *testing.T) {
	env, err := celEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{
		`request.method == 'GET'`,
		`request.pth == 'x'`,
		`request.method`,
		`request.attributes.admin`,
		`inIpRange(request.source_ip, '10.0.0.0/8')`,
		`inIpRange(request.source_ip, '10.0.0.0/33')`,
		`cidr('10.0.0.0/8').containsIP(request.source_ip)`,
		`cidr('10.0.0.0/8').containsIP(ip(request.source_ip))`,
		`request.path.startsWith('/api/') && request.host in ['a', 'b']`,
		`request.path.matches('^/api/v[0-9]+/users/[a-z]+$')`,
		`request.path.matches(request.host)`,
		`request.headers.exists(k, k.startsWith('x-'))`,
		`request.groups.exists(g, g == 'admin')`,
		`request.attributes.roles.exists(r, r == 'admin')`,
		`request.groups.all(g, request.groups.all(h, g == h))`,
		`request.groups.all(g, request.groups.all(h, request.groups.all(i, g == h)))`,
		`request.headers['user-agent'].contains('curl')`,
		`request.time > timestamp('2024-01-01T00:00:00Z')`,
		`request.path.lowerAscii().split('/').size() > 3`,
		`ip(request.source_ip).family() == 6`,
		`engine.Request{method: 'x'}.method == 'x'`,
	} {
		a, iss := env.Compile(src)
		if iss.Err() != nil {
			t.Logf("%s: ERR %v", src, iss.Err())
			continue
		}
		c, err := checkCost(env, a, 1<<62)
		t.Logf("%s: type=%v cost=%d err=%v", src, a.OutputType(), c, err)
	}
}
