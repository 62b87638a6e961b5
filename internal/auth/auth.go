// Package auth is the credential model of the user API (CONTRACT.md §7):
// three roles ordered reader < writer < admin, named bearer tokens that
// carry one role each, and the constant-time lookup of a presented token.
// It holds no HTTP: internal/api applies it to requests, internal/config
// reads the tokens the configuration names.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
)

// Role is what a credential may do. The zero Role is no role at all: a
// route that requires it is open to everyone.
type Role int

// The roles, each including the ones before it.
const (
	RoleNone Role = iota
	// RoleReader reads status, generations, nodes, experiments and stats.
	RoleReader
	// RoleWriter changes experiments: create, update, delete, start and
	// stop their preview, commit them.
	RoleWriter
	// RoleAdmin rolls back, changes cluster membership and node state,
	// and is what nodes present to each other.
	RoleAdmin
)

// String is the role's name as the configuration and error messages
// spell it.
func (r Role) String() string {
	switch r {
	case RoleReader:
		return "reader"
	case RoleWriter:
		return "writer"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// ParseRole parses "reader", "writer" or "admin".
func ParseRole(s string) (Role, error) {
	for r := RoleReader; r <= RoleAdmin; r++ {
		if s == r.String() {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("%q is not a role: use \"reader\", \"writer\" or \"admin\"", s)
}

// Credential is one configured bearer token. Name identifies it in logs
// and errors; Secret never leaves this package's Set.
type Credential struct {
	Name   string
	Role   Role
	Secret string
}

// Identity is who sent a request, as logs may show it: the credential's
// name and role, never its secret.
type Identity struct {
	Name string
	Role Role
}

// Anonymous is the identity of a request to a node without credentials
// (the loopback development mode): it may do everything.
var Anonymous = Identity{Name: "anonymous", Role: RoleAdmin}

// maxSecret bounds a token, so that a lookup costs the same small hash
// whatever a client sends.
const maxSecret = 4096

type entry struct {
	id  Identity
	sum [sha256.Size]byte
}

// Set holds the configured credentials. The zero Set (or nil) has none:
// every request is Anonymous.
type Set struct {
	entries []entry
}

// NewSet checks creds (unique names, a role each, secrets that a Bearer
// header can carry and that no other credential uses) and returns their
// Set. Errors name the credential, never its secret.
func NewSet(creds []Credential) (*Set, error) {
	s := &Set{}
	names := make(map[string]bool, len(creds))
	var errs []error
	for _, c := range creds {
		switch {
		case c.Name == "":
			errs = append(errs, errors.New("a credential has no name"))
			continue
		case names[c.Name]:
			errs = append(errs, fmt.Errorf("credential %q: the name is used twice", c.Name))
			continue
		case c.Role < RoleReader || c.Role > RoleAdmin:
			errs = append(errs, fmt.Errorf("credential %q: no role", c.Name))
			continue
		case !validToken(c.Secret):
			errs = append(errs, fmt.Errorf("credential %q: the token must be 1 to %d characters of A-Z a-z 0-9 - . _ ~ + / (then = padding)", c.Name, maxSecret))
			continue
		}
		names[c.Name] = true
		e := entry{id: Identity{Name: c.Name, Role: c.Role}, sum: sha256.Sum256([]byte(c.Secret))}
		if _, dup := s.lookup(e.sum); dup {
			errs = append(errs, fmt.Errorf("credential %q: the same token as another credential", c.Name))
			continue
		}
		s.entries = append(s.entries, e)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// Empty reports whether no credential is configured.
func (s *Set) Empty() bool { return s == nil || len(s.entries) == 0 }

// Lookup returns the identity whose token is token. It compares the
// token's hash with every credential's in constant time, so neither the
// answer's timing nor an early exit tells how much of a token was right.
func (s *Set) Lookup(token string) (Identity, bool) {
	if s == nil || len(token) > maxSecret {
		return Identity{}, false
	}
	return s.lookup(sha256.Sum256([]byte(token)))
}

func (s *Set) lookup(sum [sha256.Size]byte) (Identity, bool) {
	var found Identity
	ok := 0
	for _, e := range s.entries {
		eq := subtle.ConstantTimeCompare(sum[:], e.sum[:])
		if eq == 1 {
			found = e.id
		}
		ok |= eq
	}
	return found, ok == 1
}

// ParseBearer returns the token of an Authorization header value of the
// form "Bearer <token68>" (RFC 6750 §2.1: the scheme is case-insensitive,
// the token one token68). Anything else is not a bearer credential.
func ParseBearer(header string) (string, bool) {
	scheme, rest, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token := strings.TrimLeft(rest, " ")
	if !validToken(token) {
		return "", false
	}
	return token, true
}

// validToken reports whether t is a token68 of at most maxSecret bytes.
func validToken(t string) bool {
	if t == "" || len(t) > maxSecret {
		return false
	}
	i := 0
	for ; i < len(t); i++ {
		c := t[i]
		if !isToken68(c) {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(t); i++ {
		if t[i] != '=' {
			return false
		}
	}
	return true
}

func isToken68(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
}
