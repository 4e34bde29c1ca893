package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// savedHistory is the history a run left, as it read it, kept beside the
// store: the next run reads the store again, with its own version of the
// code, and must find the same.
type savedHistory struct {
	Model   string   `json:"model"`
	History *history `json:"history"`
}

const savedFile = "history.json"

// loadSaved returns the history the previous run saved in dir, or nil.
func loadSaved(dir string) (*savedHistory, error) {
	data, err := os.ReadFile(filepath.Join(dir, savedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s savedHistory
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, savedFile), err)
	}
	return &s, nil
}

// save keeps h, as read by model, in dir.
func save(dir, model string, h *history) error {
	data, err := json.MarshalIndent(savedHistory{Model: model, History: h}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, savedFile), append(data, '\n'), 0o644)
}

// sameHistory returns an error showing both when a and b differ.
func sameHistory(a, b *history) error {
	ja, err := json.Marshal(a)
	if err != nil {
		return err
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return err
	}
	if !bytes.Equal(ja, jb) {
		return fmt.Errorf("saved %s\n  read %s", ja, jb)
	}
	return nil
}
