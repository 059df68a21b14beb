// OamdProcessOptions: how StdioTransport starts the daemon (`oamd stdio` plus flags). Kept apart from the
// transport so games can fill it from settings and so the argument line is built and tested in one place.

using System;
using System.Collections.Generic;
using System.Text;

namespace Oamd
{
    public sealed class OamdProcessOptions
    {
        /// <summary>The self-contained executable: <c>oamd</c>, or <c>oamd.exe</c> on Windows
        /// (see OamdExecutable for where a Unity build keeps it).</summary>
        public string ExecutablePath;
        /// <summary><c>--model</c>: the backend behind "system" (<c>llamacpp:/path/model.gguf</c>,
        /// <c>openai:http://127.0.0.1:8080/v1</c>). Null: $OAMD_MODEL, else only scripted models work.</summary>
        public string Model;
        /// <summary><c>--tool-timeout</c> in seconds (0 = forever); null keeps the daemon's default.</summary>
        public double? ToolTimeoutSeconds;
        /// <summary><c>--log-level</c> (debug, info, warning, error); null keeps the daemon's default.</summary>
        public string LogLevel;
        /// <summary>More arguments after the ones above, one string each (quoted here, never by a shell).</summary>
        public List<string> ExtraArguments = new List<string>();
        /// <summary>The daemon's working directory; null: the executable's own directory.</summary>
        public string WorkingDirectory;
        /// <summary>Environment variables to set for the daemon (e.g. OAMD_MODEL).</summary>
        public Dictionary<string, string> Environment = new Dictionary<string, string>();
        /// <summary>Each line the daemon logs on stderr, called on a background thread (Unity's
        /// Debug.Log is safe there). The last lines are also kept for the disconnect message.</summary>
        public Action<string> OnLogLine;
        /// <summary>How long Dispose waits for the daemon to exit after closing its input, before killing it.</summary>
        public TimeSpan ExitTimeout = TimeSpan.FromSeconds(3);

        /// <summary>The arguments as separate strings, <c>stdio</c> first.</summary>
        public List<string> ArgumentList()
        {
            var args = new List<string> { "stdio" };
            if (Model != null) { args.Add("--model"); args.Add(Model); }
            if (ToolTimeoutSeconds.HasValue)
            {
                args.Add("--tool-timeout");
                args.Add(ToolTimeoutSeconds.Value.ToString("R", System.Globalization.CultureInfo.InvariantCulture));
            }
            if (LogLevel != null) { args.Add("--log-level"); args.Add(LogLevel); }
            args.AddRange(ExtraArguments);
            return args;
        }

        /// <summary>The argument line for ProcessStartInfo.Arguments. ArgumentList is missing from
        /// .NET Standard 2.0, so the line is split again by the runtime: by CommandLineToArgvW's rules on
        /// Windows and .NET, by shell-like rules on Mono for Unix. Any argument with a character outside
        /// a plain set is double-quoted in the form both read alike (a path with spaces, quotes or
        /// apostrophes arrives as one argument). Left apart: a backslash before another backslash, '$'
        /// or '`' in the middle of an argument, which Mono on Unix would read as an escape.</summary>
        public string CommandLine()
        {
            var line = new StringBuilder();
            foreach (var arg in ArgumentList())
            {
                if (line.Length > 0) line.Append(' ');
                line.Append(Quote(arg));
            }
            return line.ToString();
        }

        static bool IsPlain(string arg)
        {
            if (arg.Length == 0) return false;
            foreach (char c in arg)
                if (!(char.IsLetterOrDigit(c) || "-_.,:/=@+%".IndexOf(c) >= 0)) return false;
            return true;
        }

        internal static string Quote(string arg)
        {
            if (IsPlain(arg)) return arg;
            var quoted = new StringBuilder("\"");
            int backslashes = 0;
            foreach (char c in arg)
            {
                if (c == '\\') { backslashes++; continue; }
                // Backslashes are literal unless they precede a quote: then each is doubled.
                quoted.Append('\\', c == '"' ? backslashes * 2 + 1 : backslashes);
                backslashes = 0;
                quoted.Append(c);
            }
            quoted.Append('\\', backslashes * 2);
            return quoted.Append('"').ToString();
        }
    }
}
