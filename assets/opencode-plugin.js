// smarter-compact OpenCode plugin. `smarter-compact install` wrote this file and
// `smarter-compact uninstall` removes it; a reinstall replaces it, so do not edit it.
//
// For every model request OpenCode makes, the chat.headers hook adds
// x-smarter-compact-session-id: <OpenCode session id>, so the proxy files the request under
// that session, and registers the session once per OpenCode process
// (`smarter-compact hook opencode-session --cwd <dir> <id>`). A prompt that is exactly
// "/smarter-compact" sets the session's force flag (`smarter-compact hook force <id>`): the
// next request is trimmed.
//
// It imports nothing but node:child_process and never throws or waits on the command:
// whatever fails, OpenCode goes on as if the plugin were not there.
import { execFile } from "node:child_process"

const exe = "__SMARTER_COMPACT_EXE__"
const registered = new Set()

function run(args) {
  try {
    execFile(exe, args, { timeout: 10000, windowsHide: true }, () => {})
  } catch {
    // a missing or moved executable: nothing to do
  }
}

function promptText(parts) {
  return (parts ?? [])
    .filter((p) => p && p.type === "text" && typeof p.text === "string")
    .map((p) => p.text)
    .join("")
    .trim()
}

// OpenCode calls every export of a plugin file as a plugin, so this is the only one.
export const SmarterCompact = async ({ directory }) => ({
  "chat.headers": async (input, output) => {
    const id = input?.sessionID
    if (typeof id !== "string" || id === "") return
    output.headers["x-smarter-compact-session-id"] = id
    if (!registered.has(id)) {
      registered.add(id)
      const args = ["hook", "opencode-session"]
      if (typeof directory === "string" && directory !== "") args.push("--cwd", directory)
      run([...args, id])
    }
  },
  "chat.message": async (input, output) => {
    const id = input?.sessionID
    if (typeof id === "string" && id !== "" && promptText(output?.parts) === "/smarter-compact") {
      run(["hook", "force", id])
    }
  },
})
