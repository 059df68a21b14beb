// OamdClient.WaitForModelAsync against a real daemon, as a game's loading screen would call it:
//   mono waitformodel.exe EXECUTABLE POLL_MS [MODEL_SPEC]
// The client spawns `EXECUTABLE stdio [--model MODEL_SPEC]` (the environment passes on: OAMD_MODELS,
// OAMD_CATALOG_BASE_URL) and waits on MainLoop's context. Each answer onProgress gets is printed at once,
// `progress: STATUS available=BOOL bytes=N total=M main=yes|no detail=...`, so a test can act on it (let
// a paused download go on); then `result: STATUS available=BOOL reports=N` and, once the model is there,
// `answered: yes` after one short turn on it. Exit 0, or 1 with `error: ...`.

using System;
using System.Collections.Generic;
using System.Threading.Tasks;
using Oamd;

static class WaitForModel
{
    static int Main(string[] args)
    {
        try
        {
            MainLoop.Run(() => Run(args[0], int.Parse(args[1]), args.Length > 2 ? args[2] : null));
            return 0;
        }
        catch (Exception ex)
        {
            Console.WriteLine("error: " + ex);
            return 1;
        }
    }

    static async Task Run(string exe, int pollMs, string model)
    {
        using (var client = await OamdClient.StartAsync(new OamdProcessOptions { ExecutablePath = exe, Model = model }))
        {
            int reports = 0;
            var answer = await client.WaitForModelAsync(a =>
            {
                reports++;
                Console.WriteLine("progress: " + Get(a, "status") + " available=" + Json.Write(Get(a, "available"))
                    + " bytes=" + Json.Write(Get(a, "bytesDownloaded")) + " total=" + Json.Write(Get(a, "totalBytes"))
                    + " main=" + (MainLoop.OnMainThread ? "yes" : "no") + " detail=" + Get(a, "detail"));
                Console.Out.Flush();
            }, TimeSpan.FromMilliseconds(pollMs));
            // onProgress has run for the last answer too before the wait returned
            Console.WriteLine("result: " + Get(answer, "status") + " available=" + Json.Write(Get(answer, "available"))
                + " reports=" + reports);
            if (Equals(Get(answer, "available"), true))
            {
                // the model the game waited for answers a turn (a few tokens: a load, not a quality check)
                await client.CreateSessionAsync("check", options: new Dictionary<string, object> { { "maxResponseTokens", 8 } });
                var reply = await client.RespondAsync("check", "Say hello.");
                Console.WriteLine("answered: " + (reply.Usage.OutputTokens > 0 ? "yes" : "no"));
            }
        }
    }

    static object Get(Dictionary<string, object> o, string key)
    {
        object value;
        return o.TryGetValue(key, out value) ? value : null;
    }
}
