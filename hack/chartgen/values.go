/*
Copyright 2026 The lockwarden Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"fmt"
	"regexp"
	"strings"
)

// node is one key of values.yaml: a section of nested keys, or a leaf with a default. The root
// node stands for the whole file; its annotations come from the file's header comment.
type node struct {
	name     string    // the key itself, e.g. "tag"; empty for the root
	path     string    // dotted path from the root, e.g. "image.tag"; empty for the root
	line     int       // 1-based line of the key in values.yaml
	desc     string    // the comment above the key without its annotation lines, joined into one line
	def      string    // a leaf's default as written; empty for a section
	leaf     bool      // the key has a value on its line, not nested keys
	patches  []*object // the key's @schema annotations in order, each merged into its schema
	children []*node   // a section's keys, in file order
}

const annotationPrefix = "@schema"

var keyLine = regexp.MustCompile(`^( *)([A-Za-z0-9_]+):(?: (.*))?$`)

// parseValues reads values.yaml line by line into a tree. The comment lines right above a key (no
// blank line between) describe it; a key with nothing after the colon opens a section of nested
// keys; any other key is a leaf. Every key must have a description, and block lists are not
// allowed (write `[]` or a flow list), so that every setting the chart reads appears in the table.
//
// Comment lines that start with @schema are annotations rather than description: see
// parseAnnotations. Those in the header (the comment block at the top of the file that a blank
// line ends) apply to the whole values object; anywhere else, an annotation must sit right above
// a key.
func parseValues(text string) (*node, error) {
	type frame struct {
		indent int
		node   *node
	}
	root := &node{}
	var (
		stack       []frame
		comment     []string
		annotations []annotationLine
		seenKey     bool
	)
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			if len(annotations) > 0 {
				if seenKey {
					return nil, fmt.Errorf("line %d: %s annotation not right above a key", annotations[0].line, annotationPrefix)
				}
				patches, err := parseAnnotations("the header", annotations)
				if err != nil {
					return nil, err
				}
				root.patches = append(root.patches, patches...)
			}
			comment, annotations = nil, nil
			continue
		case strings.HasPrefix(trimmed, "#"):
			c := strings.TrimSpace(strings.TrimPrefix(trimmed, "#"))
			if rest, ok := strings.CutPrefix(c, annotationPrefix); ok && (rest == "" || rest[0] == ' ') {
				annotations = append(annotations, annotationLine{i + 1, rest})
			} else {
				comment = append(comment, c)
			}
			continue
		}
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: expected `key: value` or `key:` (block lists are not supported): %q", i+1, line)
		}
		seenKey = true
		indent, key, rest := len(m[1]), m[2], strings.TrimSpace(m[3])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		parent := root
		if len(stack) > 0 {
			parent = stack[len(stack)-1].node
		}
		n := &node{name: key, path: key, line: i + 1, desc: strings.Join(comment, " "), def: rest, leaf: rest != ""}
		if parent != root {
			n.path = parent.path + "." + key
		}
		if n.desc == "" {
			return nil, fmt.Errorf("line %d: %s has no comment above it", i+1, n.path)
		}
		patches, err := parseAnnotations(n.path, annotations)
		if err != nil {
			return nil, err
		}
		n.patches = patches
		parent.children = append(parent.children, n)
		if !n.leaf {
			stack = append(stack, frame{indent, n})
		}
		comment, annotations = nil, nil
	}
	if len(annotations) > 0 {
		return nil, fmt.Errorf("line %d: %s annotation not right above a key", annotations[0].line, annotationPrefix)
	}
	return root, nil
}

// leaves returns the leaves under n in file order.
func (n *node) leaves() []*node {
	if n.leaf {
		return []*node{n}
	}
	var out []*node
	for _, c := range n.children {
		out = append(out, c.leaves()...)
	}
	return out
}
