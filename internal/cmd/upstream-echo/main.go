// Command upstream-echo is the trivial MCP server that
// scripts/compare-upstream.sh gates: one tool, echo, that answers its
// arguments at once; over stdio, or Streamable HTTP with -http ADDR.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	addr := flag.String("http", "", "serve Streamable HTTP at ADDR/mcp instead of stdio")
	flag.Parse()
	srv := server.NewMCPServer("upstream-echo", "1")
	srv.AddTool(mcp.NewTool("echo", mcp.WithDescription("Answer the arguments."), mcp.WithString("text")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			data, _ := json.Marshal(req.Params.Arguments)
			return mcp.NewToolResultText(string(data)), nil
		})
	var err error
	if *addr != "" {
		err = server.NewStreamableHTTPServer(srv).Start(*addr)
	} else {
		err = server.ServeStdio(srv)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream-echo:", err)
		os.Exit(1)
	}
}
