// OamdLifetime: in Unity, closes the clients a game left open when play mode ends, scripts reload or the
// player quits, so no daemon process, reader or writer thread outlives the play session that made it
// (Dispose ends the spawned daemon: end of input, killed after ExitTimeout). It also holds with "Enter
// Play Mode Options" (no domain reload), where static state and threads survive from one play to the next.
// Clients made in edit mode (editor tools) are left alone until scripts reload or the editor quits.

#if UNITY_5_3_OR_NEWER
using System;
using System.Collections.Generic;
using UnityEngine;

namespace Oamd
{
    static class OamdLifetime
    {
        static readonly Dictionary<OamdClient, bool> Open = new Dictionary<OamdClient, bool>();
        static volatile bool _playing;

        /// <summary>Called by each new client; the value remembers whether it belongs to play mode.</summary>
        internal static void Track(OamdClient client)
        {
            lock (Open) Open[client] = _playing;
        }

        internal static void Forget(OamdClient client)
        {
            lock (Open) Open.Remove(client);
        }

        static void Close(bool playModeOnly)
        {
            var closing = new List<OamdClient>();
            lock (Open)
                foreach (var kv in Open)
                    if (kv.Value || !playModeOnly) closing.Add(kv.Key);
            foreach (var client in closing)
            {
                try { client.Dispose(); }
                catch (Exception ex) { Debug.LogException(ex); }
            }
        }

        static void CloseAll()
        {
            Close(false);
        }

        // Runs each time play mode starts (and once in a player), domain reload or not: unhook before
        // hooking, since without a reload the handler from the last play is still attached.
        [RuntimeInitializeOnLoadMethod(RuntimeInitializeLoadType.SubsystemRegistration)]
        static void OnPlay()
        {
            _playing = true;
            Application.quitting -= CloseAll;
            Application.quitting += CloseAll;
        }

#if UNITY_EDITOR
        [UnityEditor.InitializeOnLoadMethod]
        static void OnEditorLoad()
        {
            UnityEditor.EditorApplication.playModeStateChanged += state =>
            {
                if (state != UnityEditor.PlayModeStateChange.ExitingPlayMode) return;
                Close(true);
                _playing = false;
            };
            // Threads blocked in a read would stall the reload; the new domain could not reach them anyway.
            UnityEditor.AssemblyReloadEvents.beforeAssemblyReload += CloseAll;
            UnityEditor.EditorApplication.quitting += CloseAll;
        }
#endif
    }
}
#endif
