package node

import (
	"strings"
	"testing"
)

// TestTOMLBombsKeepNodesServing (issue 16, attack 1): a 5 MB policy.toml
// of nested arrays overflowed the TOML parser's stack on the leader, a
// fatal error that killed the process, and the next leader validating the
// same commit died too. Now each bomb is an INVALID generation naming the
// file, and every node keeps serving the active one.
func TestTOMLBombsKeepNodesServing(t *testing.T) {
	c := newTestCluster(t)
	c.start("n1", nil)
	c.start("n2", nil)
	all := []string{"n1", "n2"}
	c.allServe(1, all...)
	leader := c.leader(all...)

	bombs := []struct{ toml, want string }{
		{"default_action = \"deny\"\ndescription = " + strings.Repeat("[", 2_500_000) + strings.Repeat("]", 2_500_000) + "\n",
			"web/policy.toml: file is 5000039 bytes, over the 1048576 byte limit of a policy file"},
		{"default_action = \"deny\"\nx = " + strings.Repeat("{a=", 20_000) + "1" + strings.Repeat("}", 20_000) + "\n",
			"web/policy.toml:2: value nested more than 16 levels deep"},
	}
	for i, b := range bombs {
		c.write(b.toml)
		c.reconcile(leader)
		g := generation(t, c.base(followerOf(leader, all)), uint64(2+i), "INVALID")
		if len(g.Errors) != 1 || !strings.HasPrefix(g.Errors[0], b.want) {
			t.Errorf("generation %d errors %q, want %q", 2+i, g.Errors, b.want)
		}
		for _, id := range all {
			if err := serves(c.base(id), 1); err != nil {
				t.Error(err)
			}
		}
	}
}
