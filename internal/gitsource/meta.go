package gitsource

// maxMessageBytes bounds the commit message CommitMeta returns: the
// subject and trailers a history needs are at its start, and a message is
// whatever a pusher wrote.
const maxMessageBytes = 4 << 10

// CommitMeta is what a commit says about itself, as git has it: display
// text from the repository, unchecked.
type CommitMeta struct {
	AuthorName, AuthorEmail string
	// Message is the commit message, cut at 4 KiB.
	Message string
}

// CommitMeta reads the author and message of a commit in the clone.
func (s *Source) CommitMeta(hash string) (CommitMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.commit(hash)
	if err != nil {
		return CommitMeta{}, err
	}
	msg := c.Message
	if len(msg) > maxMessageBytes {
		msg = msg[:maxMessageBytes]
	}
	return CommitMeta{AuthorName: c.Author.Name, AuthorEmail: c.Author.Email, Message: msg}, nil
}
