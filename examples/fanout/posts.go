package main

import (
	"context"
	"errors"
	"fmt"
)

// PublishPost is the command each queue message carries: an author
// publishes a post.
type PublishPost struct {
	Author, Post, Body string
}

// AggregateID implements command.Command.
func (c PublishPost) AggregateID() string { return c.Author }

// PostPublished records a post. The fan-out copies it into every follower's
// timeline.
type PostPublished struct {
	Post string `json:"post"`
	Body string `json:"body"`
}

// ErrEmptyPost refuses a post without a body.
var ErrEmptyPost = errors.New("a post needs a body")

// Author is the aggregate of an author's posts. It takes posts of any
// length: the author's profile shows them whole. (The timelines, another
// team's tables, cut at 280 characters: see timelines.go.)
type Author struct {
	posts int
}

// Publish decides.
func (a *Author) Publish(_ context.Context, c PublishPost) ([]any, error) {
	if c.Body == "" {
		return nil, fmt.Errorf("%w: post %s", ErrEmptyPost, c.Post)
	}
	return []any{PostPublished{Post: c.Post, Body: c.Body}}, nil
}

// Published evolves.
func (a *Author) Published(PostPublished) { a.posts++ }
