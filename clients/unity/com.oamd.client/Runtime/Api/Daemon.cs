// The daemon-wide methods: ping, model/availability (and waiting for a model the daemon is still
// fetching), content/generate and shutdown.

using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Oamd
{
    public sealed partial class OamdClient
    {
        /// <summary><c>ping</c>.</summary>
        public Task PingAsync(CancellationToken cancellation = default(CancellationToken))
        {
            return Call("ping", null, cancellation);
        }

        /// <summary><c>model/availability</c>: <c>available</c>, <c>status</c>, <c>detail</c> (how to fix it)…</summary>
        public Task<Dictionary<string, object>> ModelAvailabilityAsync(CancellationToken cancellation = default(CancellationToken))
        {
            return Call("model/availability", null, cancellation);
        }

        /// <summary>Asks <c>model/availability</c> every <paramref name="poll"/> (default one second) until
        /// the model is <c>available</c>, and returns that last answer. While the daemon fetches the model
        /// (<c>--model llamacpp:NAME?pull=on-request</c>) the answers say <c>status</c> <c>downloading</c>
        /// with <c>bytesDownloaded</c> and <c>totalBytes</c>; a failed download is said once as
        /// <c>downloadable</c> (<c>detail</c> "download failed: …") and the next check starts it again, so
        /// the first <c>downloadable</c> is asked again and a second one ends the wait. Any other status
        /// (<c>unavailable</c>: no model configured, a file that does not load) ends it at once: check
        /// <c>available</c> in the answer returned. Each answer goes to <paramref name="onProgress"/> on the
        /// callback thread (Unity's main thread), which has run before the next check and before this
        /// task completes.</summary>
        public async Task<Dictionary<string, object>> WaitForModelAsync(Action<Dictionary<string, object>> onProgress = null,
            TimeSpan? poll = null, CancellationToken cancellation = default(CancellationToken))
        {
            var interval = poll ?? TimeSpan.FromSeconds(1);
            if (interval <= TimeSpan.Zero) throw new ArgumentOutOfRangeException("poll", "The poll interval must be positive.");
            bool retried = false;
            while (true)
            {
                var answer = await ModelAvailabilityAsync(cancellation).ConfigureAwait(false);
                if (onProgress != null) await Report(onProgress, answer).ConfigureAwait(false);
                if (JsonFields.Bool(answer, "available")) return answer;
                string status = JsonFields.String(answer, "status");
                if (status == "downloadable" && !retried) retried = true;  // a failure, said once: retry it once
                else if (status != "downloading") return answer;
                await Task.Delay(interval, cancellation).ConfigureAwait(false);
            }
        }

        Task Report(Action<Dictionary<string, object>> onProgress, Dictionary<string, object> answer)
        {
            // Posted like any callback (one that throws goes to CallbackFailed); awaited so answers are
            // shown in order and the last one before the wait returns.
            var shown = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            _callbacks.Post(() =>
            {
                try { onProgress(answer); }
                finally { shown.TrySetResult(true); }
            });
            return shown.Task;
        }

        /// <summary><c>content/generate</c>: JSON matching <paramref name="schema"/> (keys in schema order).</summary>
        public async Task<object> GenerateAsync(string prompt, IDictionary<string, object> schema, string instructions = null,
            object context = null, object model = null, IDictionary<string, object> extra = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = new Dictionary<string, object> { { "prompt", prompt }, { "schema", schema } }
                .Put("instructions", instructions).Put("context", context).Put("model", model).Merge(extra);
            return JsonFields.Get(await Call("content/generate", p, cancellation).ConfigureAwait(false), "content");
        }

        /// <summary><c>shutdown</c>: this connection's work ends (over stdio the daemon then exits once
        /// the client is disposed). Dispose afterwards.</summary>
        public Task ShutdownAsync(CancellationToken cancellation = default(CancellationToken))
        {
            return Call("shutdown", null, cancellation);
        }
    }
}
