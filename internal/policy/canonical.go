package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Canonical returns the canonical form of a merged policy: JSON with rules
// in (priority, name) order, tests by name and map keys sorted, so the same
// content gives the same bytes whatever the file layout or TOML formatting.
func (p *Policy) Canonical() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		// Policies hold only TOML-decoded values, which always marshal.
		panic("policy: canonical form: " + err.Error())
	}
	return b
}

// Etag is the opaque version of a policy's content (AIP-154 style): the
// first 128 bits of the SHA-256 of its canonical form, in hex.
func (p *Policy) Etag() string {
	sum := sha256.Sum256(p.Canonical())
	return hex.EncodeToString(sum[:16])
}
