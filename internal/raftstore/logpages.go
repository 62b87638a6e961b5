package raftstore

import raftboltdb "github.com/hashicorp/raft-boltdb/v2"

// ReleaseLogPages drops the raft log pages this node read back through
// bolt's memory map from its resident memory (dropMappedPages, Linux
// only). The node calls it once a generation with large lists is in:
// those pages are the lists' chunk entries, which it reads again only to
// replicate them to a lagging follower.
func (s *Store) ReleaseLogPages() error {
	if s.disk == nil {
		return nil // InMemory
	}
	bs, ok := s.disk.inner.(*raftboltdb.BoltStore)
	if !ok {
		return nil
	}
	return dropMappedPages(bs)
}
