// Package layout holds no code: its test keeps the module's packages
// linking only what their rooms allow (see ARCHITECTURE.md).
package layout
