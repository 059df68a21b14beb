// OamdPump: a component that drains a client's (or a shared queue's) callbacks once per frame, for
// clients whose callbacks cannot use Unity's SynchronizationContext (made off the main thread, or told to
// use OamdClientOptions.Queue). A client made on the main thread needs no pump.

#if UNITY_5_3_OR_NEWER
using UnityEngine;

namespace Oamd
{
    [AddComponentMenu("oamd/Oamd Pump")]
    public sealed class OamdPump : MonoBehaviour
    {
        /// <summary>Pumped each Update when set.</summary>
        public OamdClient Client;
        /// <summary>Pumped each Update when set (several clients may share it).</summary>
        public MainThreadQueue Queue;

        void Update()
        {
            if (Client != null) Client.Pump();
            if (Queue != null) Queue.Pump();
        }
    }
}
#endif
