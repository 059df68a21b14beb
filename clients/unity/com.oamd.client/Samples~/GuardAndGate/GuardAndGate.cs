// Guard and Gate: a guard NPC who opens a gate through a client tool. Put this component on any object,
// drag the gate object into `gate`, copy the folder `make dist` built (dist/oamd/) to
// Assets/StreamingAssets/oamd/ and press Play. With `model` empty the guard is scripted (no model
// needed); set it to e.g. `llamacpp:/models/guard.gguf` to let a real model decide.

using System;
using System.Collections.Generic;
using Oamd;
using UnityEngine;

public sealed class GuardAndGate : MonoBehaviour
{
    [Tooltip("Disabled when the guard opens it.")]
    public GameObject gate;
    [Tooltip("oamd's --model; empty: a scripted guard.")]
    public string model = "";
    [Tooltip("The folder under StreamingAssets holding the oamd executable.")]
    public string daemonFolder = "oamd";

    OamdClient _client;

    async void Start()
    {
        try
        {
            // Desktop: the client spawns the daemon. On Android/iOS join a running one instead:
            //   _client = await OamdClient.ConnectTcpAsync("127.0.0.1", port, token);
            _client = await OamdClient.StartAsync(new OamdProcessOptions
            {
                ExecutablePath = OamdExecutable.InStreamingAssets(daemonFolder),
                Model = string.IsNullOrEmpty(model) ? null : model,
                OnLogLine = line => Debug.Log("[oamd] " + line),
            });
            // Made on the main thread, so this handler runs there too: touching the scene is safe.
            var openGate = _client.RegisterTool(
                ToolDefinition.WithStringArguments("open_gate", "Open one of the castle's gates.", "gate"),
                call =>
                {
                    if (gate != null) gate.SetActive(false);
                    return "The " + call.Argument("gate") + " gate is open.";
                });
            _client.SessionEvent += e => { if (e.Type == "text") Debug.Log("Guard (so far): " + e.Text); };

            object guardModel = "system";
            if (string.IsNullOrEmpty(model))
                guardModel = new ScriptedModel()
                    .ToolCall("open_gate", new Dictionary<string, object> { { "gate", "north" } })
                    .Template("{toolOutput} Pass, friend.");
            await _client.CreateSessionAsync("guard", "You guard the castle. Open a gate for friends only.",
                new[] { openGate }, guardModel);
            var reply = await _client.RespondAsync("guard", "Friend! Please open the north gate.", stream: true);
            Debug.Log("Guard: " + reply.Text + " (" + reply.Usage.TotalTokens + " tokens)");
        }
        catch (OamdException ex)
        {
            Debug.LogError("oamd refused: " + ex.Name + ": " + ex.Message);
        }
        catch (Exception ex)
        {
            Debug.LogException(ex);
        }
    }

    void OnDestroy()
    {
        // Ends the daemon (end of input; killed if it lingers).
        if (_client != null) _client.Dispose();
    }
}
