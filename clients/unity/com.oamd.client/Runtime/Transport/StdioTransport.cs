// StdioTransport: spawns `oamd stdio` as a child process and speaks the protocol over its stdin/stdout.
// No shell, no window; stdin carries UTF-8 without a byte order mark (the daemon refuses a BOM); stderr,
// the daemon's log, is drained on its own thread so a chatty log can never fill the pipe and stall the
// daemon. Dispose closes stdin (the daemon then answers what it received and exits 0), waits
// ExitTimeout, and kills it if it is still running. Desktop platforms only: a player for Android, iOS,
// WebGL, UWP or a console cannot start processes, and Start raises PlatformNotSupportedException there.

#if !UNITY_EDITOR && (UNITY_ANDROID || UNITY_IOS || UNITY_TVOS || UNITY_WEBGL || UNITY_WSA || UNITY_SWITCH || UNITY_PS4 || UNITY_PS5 || UNITY_XBOXONE || UNITY_GAMECORE)
#define OAMD_NO_PROCESSES
#endif

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Text;

namespace Oamd
{
    public sealed class StdioTransport : LineTransport
    {
        const int KeptLogLines = 20;

        readonly Process _process;
        readonly OamdProcessOptions _options;
        readonly Queue<string> _recentLog = new Queue<string>();
        int _disposed;

        StdioTransport(Process process, OamdProcessOptions options)
            : base(process.StandardOutput.BaseStream, process.StandardInput.BaseStream)
        {
            _process = process;
            _options = options;
        }

        /// <summary>The daemon's process id.</summary>
        public int ProcessId { get { return _process.Id; } }

        /// <summary>Starts the daemon. <see cref="OamdProcessOptions.ExecutablePath"/> may name the
        /// executable, the folder `make dist` built, or (on Windows) the executable without <c>.exe</c>.
        /// Raises FileNotFoundException when the executable is missing, Win32Exception when it cannot be run
        /// (wrong platform; on macOS/Linux a missing execute bit is restored with chmod first), and
        /// PlatformNotSupportedException in players that cannot start processes (use TCP there).</summary>
        public static StdioTransport Start(OamdProcessOptions options)
        {
#if OAMD_NO_PROCESSES
            throw new PlatformNotSupportedException("This platform cannot start the oamd process: connect to a "
                + "running `oamd serve --tcp` with OamdClient.ConnectTcpAsync instead.");
#else
            if (options == null || string.IsNullOrEmpty(options.ExecutablePath))
                throw new ArgumentException("OamdProcessOptions.ExecutablePath is required.");
            string exe = Locate(options.ExecutablePath);
            var info = new ProcessStartInfo(exe, options.CommandLine())
            {
                UseShellExecute = false,
                CreateNoWindow = true,
                RedirectStandardInput = true,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
                WorkingDirectory = options.WorkingDirectory ?? Path.GetDirectoryName(exe),
                StandardOutputEncoding = new UTF8Encoding(false),
                StandardErrorEncoding = new UTF8Encoding(false),
                // Without it the stdin StreamWriter takes Console.InputEncoding, which is UTF-8 with a BOM
                // under some Windows code page settings, and writes that BOM at once (AutoFlush); the
                // daemon then refuses the first line. Set directly, not by reflection: IL2CPP's managed
                // code stripping would drop a setter only reflection reaches. (.NET Standard 2.1 and the
                // .NET Framework profile of Unity 2021.3 both have the property.)
                StandardInputEncoding = new UTF8Encoding(false),
            };
            foreach (var kv in options.Environment) info.EnvironmentVariables[kv.Key] = kv.Value;
            var process = Spawn(info);
            var transport = new StdioTransport(process, options);
            process.ErrorDataReceived += (sender, e) => { if (e.Data != null) transport.Log(e.Data); };
            process.BeginErrorReadLine();
            return transport;
#endif
        }

        /// <summary>The full path of the executable <paramref name="path"/> names (see Start).</summary>
        internal static string Locate(string path)
        {
            string exe = Path.GetFullPath(path);
            if (Directory.Exists(exe)) exe = Path.Combine(exe, OamdExecutable.FileName);
            else if (!File.Exists(exe) && OamdExecutable.IsWindows && Path.GetExtension(exe).Length == 0) exe += ".exe";
            if (!File.Exists(exe))
                throw new FileNotFoundException("The oamd executable is not at " + exe + " (copy dist/oamd/ there).", exe);
            return exe;
        }

        static Process Spawn(ProcessStartInfo info)
        {
            try
            {
                return Process.Start(info);
            }
            catch (System.ComponentModel.Win32Exception)
            {
                // Copies into StreamingAssets (from a zip, a Windows checkout, some build pipelines) can
                // drop the execute bit; restore it once and retry. Anything else fails again, as it should.
                if (OamdExecutable.IsWindows || !MakeExecutable(info.FileName)) throw;
                return Process.Start(info);
            }
        }

        static bool MakeExecutable(string path)
        {
            var chmod = new ProcessStartInfo("/bin/chmod", "u+x " + OamdProcessOptions.Quote(path))
            {
                UseShellExecute = false,
                CreateNoWindow = true,
            };
            try
            {
                using (var process = Process.Start(chmod))
                    return process.WaitForExit(5000) && process.ExitCode == 0;
            }
            catch (Exception)
            {
                return false;  // no chmod there: report the original failure
            }
        }

        void Log(string line)
        {
            lock (_recentLog)
            {
                _recentLog.Enqueue(line);
                while (_recentLog.Count > KeptLogLines) _recentLog.Dequeue();
            }
            var sink = _options.OnLogLine;
            if (sink == null) return;
            try { sink(line); }
            catch (Exception) { /* a broken log sink must not stop the drain, or the daemon blocks on stderr */ }
        }

        /// <summary>The daemon's last log lines (stderr), oldest first.</summary>
        public string[] RecentLog()
        {
            lock (_recentLog) return _recentLog.ToArray();
        }

        public override string CloseReason
        {
            get
            {
                if (_disposed != 0) return "The client closed the connection.";
                string status = "The oamd process closed its output";
                try { if (_process.WaitForExit(1000)) status = "oamd exited with code " + _process.ExitCode; }
                catch (InvalidOperationException) { /* disposed meanwhile */ }
                string[] log = RecentLog();
                return log.Length == 0 ? status + "." : status + "; its last log line: " + log[log.Length - 1];
            }
        }

        public override void Dispose()
        {
            if (System.Threading.Interlocked.Exchange(ref _disposed, 1) != 0) return;
            try { _process.StandardInput.Close(); } catch (Exception) { /* already gone */ }
            try
            {
                if (!_process.WaitForExit((int)_options.ExitTimeout.TotalMilliseconds))
                {
                    _process.Kill();
                    _process.WaitForExit();
                }
            }
            catch (InvalidOperationException) { /* exited meanwhile */ }
            catch (System.ComponentModel.Win32Exception) { /* exited meanwhile */ }
            _process.Dispose();
        }
    }
}
