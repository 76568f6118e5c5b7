# bash completion for softrdma(1), installed as share/bash-completion/completions/softrdma.
# Commands and options come from the softrdma being completed (`softrdma help`, `softrdma help
# COMMAND`), so they never drift from the binary; the values of --device, --transport, --local
# and --view are listed here. Needs bash only (not the bash-completion package's helpers).

_softrdma_words() { # the commands (no argument) or COMMAND's options, from the binary's usage
    local self=$1
    if [[ -z $2 ]]; then
        "$self" help 2>/dev/null | while read -r word cmd _; do
            [[ $word == softrdma && -n $cmd ]] && printf '%s\n' "$cmd"
        done
    else
        "$self" help "$2" 2>/dev/null | grep -o -- '--[a-z][a-z-]*' | sort -u
    fi
}

_softrdma() {
    local self=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local cmd=${COMP_WORDS[1]} i
    if ((COMP_CWORD == 1)); then
        COMPREPLY=($(compgen -W "$(_softrdma_words "$self") --help --version" -- "$cur"))
        return
    fi
    case $cmd in
    run)
        for ((i = 2; i < COMP_CWORD; i++)); do
            if [[ ${COMP_WORDS[i]} == -- ]]; then # the program, then its arguments
                if ((i == COMP_CWORD - 1)); then
                    COMPREPLY=($(compgen -c -- "$cur"))
                else
                    COMPREPLY=($(compgen -f -- "$cur"))
                fi
                return
            fi
        done
        case $prev in
        --device) COMPREPLY=($(compgen -W "softroce0 softiwarp0" -- "$cur")) ;;
        --transport) COMPREPLY=($(compgen -W "roce iwarp" -- "$cur")) ;;
        --local) COMPREPLY=($(compgen -W "direct rings kernel" -- "$cur")) ;;
        --view) COMPREPLY=($(compgen -W "auto on off" -- "$cur")) ;;
        --cc) COMPREPLY=($(compgen -W "dcqcn none" -- "$cur")) ;;
        --pcap) COMPREPLY=($(compgen -f -- "$cur")) ;;
        --netdev) COMPREPLY=($(compgen -W "udp: af_packet: af_xdp: dpdk:" -- "$cur")) && compopt -o nospace ;;
        --faults | --mtu | --mpa | --pcap-filter | --vlan | --dpdk-qps | --pkeys | --switch) COMPREPLY=() ;;
        *) COMPREPLY=($(compgen -W "$(_softrdma_words "$self" run) --help --" -- "$cur")) ;;
        esac
        ;;
    help)
        ((COMP_CWORD == 2)) && COMPREPLY=($(compgen -W "$(_softrdma_words "$self")" -- "$cur"))
        ;;
    trace)
        if ((COMP_CWORD == 2)); then
            COMPREPLY=($(compgen -W "merge --help" -- "$cur"))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        ;;
    *)
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$(_softrdma_words "$self" "$cmd") --help" -- "$cur"))
        elif [[ $prev != --roce-port ]]; then
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        ;;
    esac
}

complete -F _softrdma softrdma
